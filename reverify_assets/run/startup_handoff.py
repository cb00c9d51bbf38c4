"""What a command's start-up prepared for the Dagster run it then makes, handed to that run as a resource.

``reverify run`` starts its servers and its key scans while Dagster imports; the run's assets borrow the servers
and take the scans' results from here. The overrides as the user gave them come here too: the run config keeps
them with their secrets redacted. A run made without the command (launched or re-executed from the UI, by
the schedule or a sensor) is given an empty one: its assets start their servers and do their scans themselves,
and give the same files.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from reverify_assets.files.output_lock import HeldOutputs
from reverify_assets.processes.prefetch import PrefetchedWork
from reverify_assets.verifier.launcher import PrestartedServers


@dataclass(frozen=True)
class StartupHandoff:
    work: PrefetchedWork = field(default_factory=PrefetchedWork)
    servers: PrestartedServers = field(default_factory=PrestartedServers)
    given_overrides: list[str] | None = None
    held_outputs: HeldOutputs = field(default_factory=HeldOutputs)  # their locks, taken by the command
