"""NeMo Gym's RewardProfiler, as its ``/aggregate_metrics`` route uses it.

From the table of scored verify responses (see :mod:`profile_table`) it gives:

* one *group* entry per task: mean/max/min/median/std of every numeric column over the task's rollouts,
  then ``sample``, the rollout counts and ``rollout_infos``;
* the *agent* statistics: the same five statistics over every row, then the ``*_across_repeats/*``
  family (see :func:`across_repeats`);
* one *repeat* entry per rollout index when there are at least two: sample/missing counts and
  mean/median/std/sem/min/max/p25/p75/95% CI of every numeric column over that repeat's tasks.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reverify_assets.metrics import column_stats as cs
from reverify_assets.metrics import names as n
from reverify_assets.metrics.json_safe import json_number
from reverify_assets.metrics.profile_table import ProfileTable

# The statistics a group or agent entry has, in their order.
DESCRIBE_STATS = (n.MEAN, n.MAX, n.MIN, n.MEDIAN, n.STD)


@dataclass
class RewardProfile:
    group_level_metrics: list[dict[str, Any]]
    agent_metrics: dict[str, Any]
    repeat_level_metrics: list[dict[str, Any]]


def profile(table: ProfileTable) -> RewardProfile:
    groups = [group_entry(table, task, start, stop) for task, start, stop in table.task_ranges()]
    agent = describe(table.columns, 0, len(table.keys), table.all_int)
    repeats = repeat_level_metrics(table)
    agent.update(across_repeats(repeats))
    return RewardProfile(groups, agent, repeats)


def describe(columns: Mapping[str, array], start: int, stop: int, all_int: bool) -> dict[str, Any]:
    """``mean/<col>``, ``max/<col>``, ``min/<col>``, ``median/<col>``, ``std/<col>`` over rows ``start:stop``.

    A statistic that pandas leaves NaN (no value; std of fewer than two) is left out, except that when the
    std of every column is NaN, the columns with no gap in these rows get std 0.0. An infinite one is None
    (NeMo Gym's JSON has null there).
    """
    segments = {name: column[start:stop] for name, column in columns.items()}
    stats: dict[str, dict[str, Any]] = {stat: {} for stat in DESCRIBE_STATS}
    for name, values in segments.items():
        values_present = cs.present(values)
        stats[n.MEAN][name] = cs.gapped_mean(values)
        stats[n.MAX][name] = _extreme(max, values_present, all_int)
        stats[n.MIN][name] = _extreme(min, values_present, all_int)
        stats[n.MEDIAN][name] = cs.median(values_present) if values_present else cs.NAN
        stats[n.STD][name] = cs.gapped_std(values)
    if all(cs.is_missing(value) for value in stats[n.STD].values()):
        for name, values in segments.items():
            if not any(cs.is_missing(value) for value in values):
                stats[n.STD][name] = 0.0
    return {
        n.stat_key(stat, name): json_number(value)
        for stat in DESCRIBE_STATS
        for name, value in stats[stat].items()
        if not cs.is_missing(value)
    }


def _extreme(pick: Any, values: Sequence[float], all_int: bool) -> int | float:
    if not values:
        return cs.NAN
    value = pick(values)
    return int(value) if all_int else value


def group_entry(table: ProfileTable, task: Any, start: int, stop: int) -> dict[str, Any]:
    count = stop - start
    entry: dict[str, Any] = {n.TASK_INDEX: task}
    entry.update(describe(table.columns, start, stop, table.all_int))
    entry["sample"] = {"agent_ref": {"name": n.SYNTHETIC_AGENT_NAME}}
    # Every profiled row is its own expected row here: masked rollouts leave both sides.
    entry["num_rollouts"] = count
    entry["expected_num_rollouts"] = count
    entry["missing_num_rollouts"] = 0
    entry["reward_profile_completion_pct"] = 100.0
    entry["rollout_infos"] = table.rollout_infos[start:stop]
    return entry


def repeat_level_metrics(table: ProfileTable) -> list[dict[str, Any]]:
    """One entry per rollout index, or none when there is a single rollout index."""
    by_rollout = table.rows_by_rollout()
    if len(by_rollout) <= 1:
        return []
    total_tasks = len({task for task, _ in table.keys})
    column_names = sorted(table.columns)
    entries = []
    for rollout, positions in by_rollout.items():
        entry: dict[str, Any] = {
            n.ROLLOUT_INDEX: int(rollout),
            "sample_count": len(positions),
            "missing_count": total_tasks - len(positions),
        }
        for name in column_names:
            column = table.columns[name]
            entry.update(_repeat_stats(name, cs.present([column[position] for position in positions])))
        entries.append(entry)
    return entries


def _repeat_stats(name: str, values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    mean = cs.compact_mean(values)
    std = cs.compact_std(values)
    sem = std / len(values) ** 0.5
    stats = {
        n.stat_key(n.MEAN, name): mean,
        n.stat_key(n.MEDIAN, name): cs.median(values),
        n.stat_key(n.STD, name): std,
        n.stat_key(n.SEM, name): sem,
        n.stat_key(n.MIN, name): float(min(values)),
        n.stat_key(n.MAX, name): float(max(values)),
        n.stat_key(n.P25, name): cs.quantile(values, 0.25),
        n.stat_key(n.P75, name): cs.quantile(values, 0.75),
    }
    interval = cs.confidence_interval(mean, sem, len(values))
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
