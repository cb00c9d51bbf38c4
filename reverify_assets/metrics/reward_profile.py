"""NeMo Gym's RewardProfiler over a whole run, as its ``/aggregate_metrics`` route uses it.

From the columns of the scored verify responses (see :mod:`profile_columns`) it gives the *agent*
statistics: the describe statistics (see :mod:`describe`) over every row, then the ``*_across_repeats/*``
family (see :func:`across_repeats`); and one *repeat* entry per rollout index when there are at least two:
sample/missing counts and mean/median/std/sem/min/max/p25/p75/95% CI of every numeric column over that
repeat's tasks. The per-task *group* entries are made as tasks complete (:mod:`group_batch`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from reverify_assets.metrics import column_stats as cs
from reverify_assets.metrics import names as n
from reverify_assets.metrics.column_scan import CompactStats, compact_stats, gapped_summary
from reverify_assets.metrics.compact_column import present
from reverify_assets.metrics.describe import describe
from reverify_assets.metrics.profile_columns import ProfileColumns


def agent_metrics(table: ProfileColumns) -> dict[str, Any]:
    """The describe statistics over every row."""
    summaries = []
    for name, column in table.columns.items():
        summary = gapped_summary(column)
        if summary is not None:
            summaries.append((name, summary))
    return describe(summaries, table.all_int)


def repeat_level_metrics(table: ProfileColumns, total_tasks: int) -> list[dict[str, Any]]:
    """One entry per rollout index (ascending), or none when there is a single rollout index."""
    if len(table.rollout_values) <= 1:
        return []
    codes = list(table.rollout_codes.chunks())  # aligned with every column's chunks
    order = sorted(range(len(table.rollout_values)), key=table.rollout_values.__getitem__)
    entries = []
    for code in order:
        count = sum(int(np.count_nonzero(chunk == code)) for chunk in codes)
        rollout = table.rollout_values[code]
        entries.append({n.ROLLOUT_INDEX: int(rollout), "sample_count": count, "missing_count": total_tasks - count})
    for name in sorted(table.columns):
        chunks = list(table.columns[name].chunks())
        for code, entry in zip(order, entries, strict=True):
            pieces = [chunk[(rows == code) & present(chunk)] for chunk, rows in zip(chunks, codes, strict=True)]
            entry.update(_repeat_stats(name, compact_stats(pieces)))
    return entries


def _repeat_stats(name: str, found: CompactStats | None) -> dict[str, float]:
    if found is None:
        return {}
    count = found.count
    sem = found.std / count**0.5
    stats = {
        n.stat_key(n.MEAN, name): found.mean,
        n.stat_key(n.MEDIAN, name): found.median,
        n.stat_key(n.STD, name): found.std,
        n.stat_key(n.SEM, name): sem,
        n.stat_key(n.MIN, name): found.min,
        n.stat_key(n.MAX, name): found.max,
        n.stat_key(n.P25, name): found.p25,
        n.stat_key(n.P75, name): found.p75,
    }
    interval = cs.confidence_interval(found.mean, sem, count)
    if interval is not None:
        stats[n.stat_key(n.CI_LOW_95, name)], stats[n.stat_key(n.CI_HIGH_95, name)] = interval
    return stats


def across_repeats(repeat_entries: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Each primary metric of the repeat entries (``mean/<col>`` and custom repeat metrics) summarised
    over the repeats: ``{mean,median,std,min,max,se,ci_low_95,ci_high_95}_across_repeats/<metric>``."""
    summary: dict[str, float] = {}
    for metric in _numeric_fields(repeat_entries):
        if not n.is_primary_metric(metric):
            continue
        values = [entry[metric] for entry in repeat_entries if _is_value(entry.get(metric))]
        if not values:
            continue
        mean = cs.compact_mean(values)
        std = cs.compact_std(values)
        se = std / len(values) ** 0.5
        summary[n.across_repeats_key(n.MEAN, metric)] = mean
        summary[n.across_repeats_key(n.MEDIAN, metric)] = cs.median(values)
        summary[n.across_repeats_key(n.STD, metric)] = std
        summary[n.across_repeats_key(n.MIN, metric)] = float(min(values))
        summary[n.across_repeats_key(n.MAX, metric)] = float(max(values))
        summary[n.across_repeats_key(n.SE, metric)] = se
        interval = cs.confidence_interval(mean, se, len(values))
        if interval is not None:
            low, high = interval
            summary[n.across_repeats_key(n.CI_LOW_95, metric)] = low
            summary[n.across_repeats_key(n.CI_HIGH_95, metric)] = high
    return summary


def _is_value(value: Any) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def _numeric_fields(entries: Sequence[Mapping[str, Any]]) -> list[str]:
    """Fields of `entries`, in first-appearance order, whose every value is a number (bools are not)."""
    fields: dict[str, bool] = {}
    for entry in entries:
        for name, value in entry.items():
            numeric = value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))
            fields[name] = fields.get(name, True) and numeric
    return [name for name, numeric in fields.items() if numeric]
