"""Dagster's capture of a run's output, made deaf to the terminal's Ctrl-C.

To show an in-process run's output while keeping a copy for the UI, Dagster's compute log manager starts a
``tail -F`` of each copy and, beside each, a Python watcher (``watch_orphans.py``) that stops the tail if the run's
process dies. They run in the CLI's process group, so a Ctrl-C reached them too, and each watcher printed a
``KeyboardInterrupt`` traceback. Started with Ctrl-C blocked, they ignore it; the CLI handles it and, on its way
out, Dagster stops them as after any run (SIGTERM).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager

import dagster as dg

from reverify_assets.defs.dagster_internals import CapturedLogContext
from reverify_assets.processes.interrupts import children_deaf_to_ctrl_c


def capture_deaf_to_ctrl_c(instance: dg.DagsterInstance) -> None:
    """Wrap ``instance``'s compute log manager (whichever is configured) so that what it starts to capture a
    run's output is started with Ctrl-C blocked."""
    manager = instance.compute_log_manager
    capture_logs = manager.capture_logs

    @contextmanager
    def deaf_capture_logs(log_key: Sequence[str]) -> Iterator[CapturedLogContext]:
        with ExitStack() as capture:
            with children_deaf_to_ctrl_c():
                context = capture.enter_context(capture_logs(log_key))
            yield context

    manager.capture_logs = deaf_capture_logs  # type: ignore[method-assign]
