"""The per-task change as a bar chart short enough for Dagster to show in place."""

from __future__ import annotations

import numpy as np
import pytest

from reverify_assets.compare.delta_bars import delta_bars, delta_bins

LABELS = [
    "-1.00 to -0.75",
    "-0.75 to -0.50",
    "-0.50 to -0.25",
    "-0.25 to <0",
    "0 (unchanged)",
    ">0 to +0.25",
    "+0.25 to +0.50",
    "+0.50 to +0.75",
    "+0.75 to +1.00",
]


@pytest.mark.parametrize(
    ("deltas", "counts"),
    [
        ([], [0] * 9),
        ([0.0, 0.0], [0, 0, 0, 0, 2, 0, 0, 0, 0]),
        ([-1.0, 1.0], [1, 0, 0, 0, 0, 0, 0, 0, 1]),
        # An edge counts in the bin nearer zero, on either side.
        ([-0.75, -0.5, -0.25, 0.25, 0.5, 0.75], [0, 1, 1, 1, 0, 1, 1, 1, 0]),
        ([-0.01, 0.01], [0, 0, 0, 1, 0, 1, 0, 0, 0]),
    ],
)
def test_tasks_fall_in_quarter_bins_around_the_unchanged(deltas: list[float], counts: list[int]) -> None:
    assert delta_bins(np.array(deltas)) == list(zip(LABELS, counts, strict=True))


def test_changes_beyond_one_widen_the_bins() -> None:
    bins = delta_bins(np.array([-4.0, 2.0]))
    assert bins[0] == ("-4.00 to -3.00", 1)
    assert bins[6] == ("+1.00 to +2.00", 1)


def test_the_chart_stays_under_dagsters_inline_limit_and_scales_bars_to_the_largest_bin() -> None:
    chart = delta_bars(np.concatenate([np.zeros(10_000), np.full(10, -1.0), np.full(1, 0.3)]))
    assert len(chart) < 1000
    assert "| 0 (unchanged) | 10000 | " + "█" * 24 + " |" in chart
    assert "| -1.00 to -0.75 | 10 | █ |" in chart, "a bin that has tasks shows at least one block"
    assert "| -0.75 to -0.50 | 0 |  |" in chart
    assert delta_bars(np.array([])) == "no compared tasks"
