"""Every figure of one set of paired rewards: pass/fail agreement when the rewards allow it, and the
mean change with its task-resampled interval always. Pure maths, no I/O."""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, ConfigDict

from reverify_assets.compare.bootstrap import BootstrapSettings, Interval, task_bootstrap_interval
from reverify_assets.compare.paired_stats import BinaryFigures, PassFailTable, binary_figures, first_non_binary

NO_ROWS = "no paired rows to compare"


class DeltaFigures(BaseModel):
    """Δ = candidate − baseline, per row."""

    model_config = ConfigDict(frozen=True)

    mean_baseline: float
    mean_candidate: float
    mean_delta: float
    interval: Interval
    mean_abs_delta: float
    changed: int  # rows whose reward differs


class PairedFigures(BaseModel):
    model_config = ConfigDict(frozen=True)

    rows: int
    tasks: int
    binary: BinaryFigures | None = None
    binary_omitted: str | None = None  # why there is no 2×2 table
    delta: DeltaFigures | None = None
    delta_omitted: str | None = None


def paired_figures(
    baseline: np.ndarray, candidate: np.ndarray, tasks: np.ndarray, bootstrap: BootstrapSettings
) -> PairedFigures:
    """Figures of row i's two rewards ``baseline[i]``, ``candidate[i]``, its task ``tasks[i]``."""
    rows, distinct_tasks = int(baseline.size), int(np.unique(tasks).size)
    if rows == 0:
        return PairedFigures(rows=0, tasks=0, binary_omitted=NO_ROWS, delta_omitted=NO_ROWS)
    deltas = candidate - baseline
    delta = DeltaFigures(
        mean_baseline=float(baseline.mean()),
        mean_candidate=float(candidate.mean()),
        mean_delta=float(deltas.mean()),
        interval=task_bootstrap_interval(deltas, tasks, bootstrap),
        mean_abs_delta=float(np.abs(deltas).mean()),
        changed=int(np.count_nonzero(deltas)),
    )
    omitted = _non_binary_reason(baseline, candidate)
    binary = None if omitted else binary_figures(PassFailTable.from_rewards(baseline, candidate))
    return PairedFigures(rows=rows, tasks=distinct_tasks, binary=binary, binary_omitted=omitted, delta=delta)


def _non_binary_reason(baseline: np.ndarray, candidate: np.ndarray) -> str | None:
    for side, rewards in (("baseline", baseline), ("candidate", candidate)):
        value = first_non_binary(rewards)
        if value is not None:
            return (
                f"rewards are not all 0 or 1 (the {side} has {value:g}): the 2×2 table, McNemar's test and "
                "Cohen's κ need pass/fail rewards"
            )
    return None
