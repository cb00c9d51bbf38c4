"""One task's entry in ``group_level_metrics`` (see :mod:`group_batch` for the batched common case).

Fields, in NeMo Gym's order: ``_ng_task_index``; the describe statistics of the task's rows (see
:mod:`describe`); ``sample``; the rollout counts; ``rollout_infos``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from reverify_assets.metrics import names as n
from reverify_assets.metrics.describe import describe, list_summary
from reverify_assets.metrics.row_numbers import Number

_EXTREME_PREFIXES = (f"{n.MAX}{n.SEPARATOR}", f"{n.MIN}{n.SEPARATOR}")


def group_entry(
    task: Any, column_values: Sequence[tuple[str, list[Number]]], all_int: bool, rollout_infos: list[dict[str, Any]]
) -> dict[str, Any]:
    summaries = []
    for name, values in column_values:
        summary = list_summary(values)
        if summary is not None:
            summaries.append((name, summary))
    entry: dict[str, Any] = {n.TASK_INDEX: task}
    entry.update(describe(summaries, all_int))
    return complete_entry(entry, rollout_infos)


def complete_entry(entry: dict[str, Any], rollout_infos: list[dict[str, Any]]) -> dict[str, Any]:
    """The fields after the statistics."""
    count = len(rollout_infos)
    entry["sample"] = {"agent_ref": {"name": n.SYNTHETIC_AGENT_NAME}}
    # Every profiled row is its own expected row here: masked rollouts leave both sides.
    entry["num_rollouts"] = count
    entry["expected_num_rollouts"] = count
    entry["missing_num_rollouts"] = 0
    entry["reward_profile_completion_pct"] = 100.0
    entry["rollout_infos"] = rollout_infos
    return entry


def as_not_all_int(entry: dict[str, Any]) -> dict[str, Any]:
    """An entry made while the table was all-int, once it is not: its max and min become floats."""
    for name, value in entry.items():
        if type(value) is int and name.startswith(_EXTREME_PREFIXES):
            entry[name] = float(value)
    return entry
