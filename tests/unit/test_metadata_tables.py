"""The markdown tables the Dagster UI shows in place on an asset's page: short enough to be shown in place,
narrow enough for a metadata value at a 1400 px window (about 390 px on the aggregate's overview, where table
cells never wrap), and holding everything the wider tables they replace held."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from reverify_assets.compare.markdown import render_figures, render_flip_table, render_narrow_figures
from reverify_assets.defs.metadata import coverage_table, key_metrics_table
from tests.unit.test_compare_files import compare, row, two_sides

# The Dagster UI shows a markdown value in place only under 1,000 characters (its MetadataEntry expands small ones).
SHOWN_IN_PLACE_BELOW = 1000
# Characters of cell text in one table row: about 370 px of the UI's 14 px monospace with the cells' padding.
WIDEST_ROW = 40
MANY = 40_000  # five-digit counts
NUMBER = re.compile(r"[+-]?\d+(?:\.\d+)?(?:e[+-]\d+)?")


def widest_row(markdown: str) -> int:
    """The most characters of cell text in one row of any table in ``markdown``."""
    rows = [line.strip("|").split("|") for line in markdown.splitlines() if line.startswith("|")]
    cells = [[cell.strip() for cell in cells] for cells in rows]
    return max(sum(map(len, row)) for row in cells if not all(set(cell) <= set(":-") for cell in row))


@pytest.mark.parametrize(
    ("before", "after"),
    [
        pytest.param(lambda t, r: 1.0, lambda t, r: 1.0, id="kappa undefined"),
        pytest.param(lambda t, r: float((t + r) % 2), lambda t, r: float(t % 3 == 0), id="pass and fail"),
        pytest.param(lambda t, r: 0.25 * (r % 4), lambda t, r: 0.5, id="not pass or fail"),
    ],
)
def test_the_figures_and_the_flip_table_fit_where_the_dagster_ui_shows_them_in_place(
    tmp_path: Path, before: Any, after: Any
) -> None:
    tasks, rollouts = MANY // 4, 4
    keys = [(t, r) for t in range(tasks) for r in range(rollouts)]
    baseline, candidate = two_sides(
        tmp_path, [row(t, r, before(t, r)) for t, r in keys], [row(t, r, after(t, r), config="c2") for t, r in keys]
    )
    report = compare(baseline, candidate)
    assert report.overall.rows == MANY
    narrow, flips = render_narrow_figures(report), render_flip_table(report)
    for rendered in (narrow, flips):
        assert len(rendered) < SHOWN_IN_PLACE_BELOW, rendered
    assert widest_row(narrow) <= WIDEST_ROW, narrow
    # Moved, not lost: every number of the report's wide figures table is in the narrow one or the 2×2 table
    # the UI shows beside it.
    assert set(NUMBER.findall(render_figures(report))) <= set(NUMBER.findall(narrow + flips)), narrow


def entry(name: str, key_metrics: dict[str, Any], coverage: dict[str, Any]) -> dict[str, Any]:
    return {"agent_ref": {"name": name}, "key_metrics": key_metrics, "coverage": coverage}


ENTRIES = [
    entry(
        "mcqa_simple_agent",
        {"mean/reward": 0.68333, "pass@1[avg-of-4]/no_answer": 20.0, "majority@4/accuracy": 96.66667},
        {
            "expected": 130,
            "scored": 120,
            "failed_by_class": {"judge_failed": 3, "verify_failed": 1},
            "missing": 6,
            "mean_reward": 0.5,
            "mean_reward_lower": 0.4,
            "mean_reward_upper": 0.6,
        },
    ),
    # An agent no row of which was scored, its plan unknown.
    entry("agent_b", {}, {"expected": "unknown", "scored": 0, "failed_by_class": {}, "missing": "unknown"}),
]


def test_each_agents_key_metrics_are_a_narrow_table_under_its_name() -> None:
    table = key_metrics_table(ENTRIES)
    assert table.split("\n\n") == [
        "**mcqa_simple_agent**",
        "| key metric | value |\n| --- | ---: |\n| mean/reward | 0.6833 |\n"
        "| pass@1[avg-of-4]/no_answer | 20.0000 |\n| majority@4/accuracy | 96.6667 |",
        "**agent_b**",
        "none",
    ]
    assert widest_row(table) <= WIDEST_ROW
    assert key_metrics_table([]) == "no agents"


def test_each_agents_coverage_is_a_narrow_table_under_its_name_a_row_per_failure_class() -> None:
    table = coverage_table(ENTRIES)
    assert table.split("\n\n") == [
        "**mcqa_simple_agent**",
        "| coverage | value |\n| --- | ---: |\n| scored | 120 of 130 |\n| failed: judge_failed | 3 |\n"
        "| failed: verify_failed | 1 |\n| missing | 6 |\n| mean reward | 0.5000 |\n"
        "| mean, lost rows as 0 | 0.4000 |\n| mean, lost rows as 1 | 0.6000 |",
        "**agent_b**",
        "| coverage | value |\n| --- | ---: |\n| scored | 0 of unknown |\n| failed | none |\n| missing | unknown |\n"
        "| mean reward | n/a |\n| mean, lost rows as 0 | n/a |\n| mean, lost rows as 1 | n/a |",
    ]
    assert widest_row(table) <= WIDEST_ROW
