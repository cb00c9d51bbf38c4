"""The per-task reward change as a markdown bar chart: short enough for Dagster's UI to show it in place
(it renders markdown under 1,000 characters inline, longer markdown, the PNG histogram's among it, behind a
click)."""

from __future__ import annotations

from itertools import pairwise

import numpy as np

BAR_WIDTH = 24
EDGES = (0.25, 0.5, 0.75, 1.0)  # of each side's bins, as shares of the widest change (at least 1)


def delta_bins(task_deltas: np.ndarray) -> list[tuple[str, int]]:
    """Tasks by how far their mean reward moved (candidate − baseline): four bins below zero, the unchanged
    tasks, four above; a fall of exactly a bin's edge counts in the bin nearer zero, as does a rise."""
    deltas = np.asarray(task_deltas, dtype=np.float64)
    reach = max(1.0, float(np.abs(deltas).max())) if deltas.size else 1.0
    edges = [0.0, *(share * reach for share in EDGES)]
    falls = [
        (f"{-outer:+.2f} to {-inner:+.2f}" if inner else f"{-outer:+.2f} to <0", (deltas >= -outer) & (deltas < -inner))
        for inner, outer in pairwise(edges)
    ]
    rises = [
        (f"{inner:+.2f} to {outer:+.2f}" if inner else f">0 to {outer:+.2f}", (deltas > inner) & (deltas <= outer))
        for inner, outer in pairwise(edges)
    ]
    bins = [*reversed(falls), ("0 (unchanged)", deltas == 0), *rises]
    return [(label, int(inside.sum())) for label, inside in bins]


def delta_bars(task_deltas: np.ndarray) -> str:
    bins = delta_bins(task_deltas)
    most = max(count for _, count in bins)
    if not most:
        return "no compared tasks"
    lines = ["| per-task Δ | tasks | |", "| --- | ---: | --- |"]
    for label, count in bins:
        bar = "█" * (max(1, round(BAR_WIDTH * count / most)) if count else 0)
        lines.append(f"| {label} | {count} | {bar} |")
    return "\n".join(lines)
