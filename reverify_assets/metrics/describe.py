"""``mean/<col>``, ``max/<col>``, ``min/<col>``, ``median/<col>``, ``std/<col>``: pandas' ``describe`` of a
group of rows, as NeMo Gym's profiler reports it for each task and for the whole run.

A statistic pandas leaves NaN (no value; std of fewer than two) is left out, except that when the std of
every column is NaN, the columns with no gap in these rows get std 0.0. An infinite one is None (NeMo
Gym's JSON has null there). Max and min are ints when the whole table is (pandas keeps an all-int frame
int64), floats otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import NamedTuple

from reverify_assets.metrics import column_stats as cs
from reverify_assets.metrics import names as n
from reverify_assets.metrics.json_safe import json_number

DESCRIBE_STATS = (n.MEAN, n.MAX, n.MIN, n.MEDIAN, n.STD)
_EXTREMES = (1, 2)  # positions of max and min in a Summary


class Summary(NamedTuple):
    """One column over a group of rows that has at least one value there."""

    mean: float
    max: float
    min: float
    median: float
    std: float  # NaN for fewer than two values
    gapless: bool


@lru_cache(maxsize=1024)
def stat_keys(name: str) -> tuple[str, ...]:
    return tuple(n.stat_key(stat, name) for stat in DESCRIBE_STATS)


def describe(summaries: Sequence[tuple[str, Summary]], all_int: bool) -> dict[str, int | float | None]:
    """The statistics of the columns that have a value in the group, stat by stat, columns in order."""
    if all(summary.std != summary.std for _, summary in summaries):
        summaries = [(name, summary._replace(std=0.0) if summary.gapless else summary) for name, summary in summaries]
    described: dict[str, int | float | None] = {}
    for position in range(len(DESCRIBE_STATS)):
        extreme = position in _EXTREMES
        for name, summary in summaries:
            value = summary[position]
            if value != value:
                continue
            if extreme:
                value = int(value) if all_int else float(value)
            described[stat_keys(name)[position]] = json_number(value)
    return described


def list_summary(values: Sequence[float]) -> Summary | None:
    """A few values (a task's rollouts; NaN: a gap)."""
    kept = cs.present(values)
    if not kept:
        return None
    mean, std = cs.gapped_mean_std(values)
    return Summary(mean, max(kept), min(kept), cs.median(kept), std, len(kept) == len(values))
