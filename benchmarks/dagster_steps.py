"""The step windows Dagster itself recorded for a run: where the CLI's time went between the phases.

`reverify run` materializes its assets in the instance at $DAGSTER_HOME; each step's STEP_START and
STEP_SUCCESS (or STEP_FAILURE) events carry unix timestamps. Read after the run, from the fresh instance the
benchmark gave it, they split start-up and aggregate into Dagster's own parts (run creation, the scans,
the join, the verify step, the metrics step) without instrumenting the product.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["RunWindows", "read_run_windows"]


@dataclass
class RunWindows:
    run_start: float | None = None  # unix time
    run_end: float | None = None
    steps: dict[str, tuple[float, float]] = field(default_factory=dict)  # step key -> (start, end), in order


def read_run_windows(dagster_home: Path) -> RunWindows | None:
    """The one run in ``dagster_home``'s instance; None when there is not exactly one."""
    import dagster as dg  # imported here: half a second the harness pays only after its measurements

    kinds = {dg.DagsterEventType.STEP_START, dg.DagsterEventType.STEP_SUCCESS, dg.DagsterEventType.STEP_FAILURE}
    with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
        records = instance.get_run_records()
        if len(records) != 1:
            return None
        record = records[0]
        windows = RunWindows(record.start_time, record.end_time)
        starts: dict[str, float] = {}
        for entry in instance.all_logs(record.dagster_run.run_id, of_type=kinds):
            if not entry.step_key:
                continue
            if entry.dagster_event_type == dg.DagsterEventType.STEP_START:
                starts[entry.step_key] = entry.timestamp
            elif entry.step_key in starts:
                windows.steps[entry.step_key] = (starts[entry.step_key], entry.timestamp)
    return windows
