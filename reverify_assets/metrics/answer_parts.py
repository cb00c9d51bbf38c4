"""The sections of an ``/aggregate_metrics`` answer besides the reward profile: key metrics, coverage,
``per_task_metrics`` and custom repeat metrics, merged the way NeMo Gym 0.7.0 merges them."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from numbers import Real
from typing import Any

from reverify_assets.metrics import names as n
from reverify_assets.metrics.hooks import Row, TasksHook
from reverify_assets.metrics.json_safe import json_safe
from reverify_assets.metrics.reward_profile import across_repeats

# The answer's sections, in NeMo Gym's order.
ANSWER_KEYS = ("group_level_metrics", "agent_metrics", "key_metrics", "perf_summary", "repeat_level_metrics")


def answer(
    groups: list[dict[str, Any]],
    agent_metrics: dict[str, Any],
    key_metrics: dict[str, Any],
    perf_summary: dict[str, Any] | None,
    repeats: list[dict[str, Any]],
) -> dict[str, Any]:
    return dict(zip(ANSWER_KEYS, (groups, agent_metrics, key_metrics, perf_summary, repeats), strict=True))


def empty_answer() -> dict[str, Any]:
    """NeMo Gym's answer to an empty ``verify_responses``."""
    return answer([], {}, {}, None, [])


def default_key_metrics(agent_metrics: Mapping[str, Any]) -> dict[str, Any]:
    """Every ``mean/*`` entry."""
    prefix = f"{n.MEAN}{n.SEPARATOR}"
    return {name: value for name, value in agent_metrics.items() if name.startswith(prefix)}


def coverage_metrics(rollouts: int, measured: int, tasks: int, measured_tasks: int) -> dict[str, int]:
    """How much of the run the quality metrics were computed from (only published when a row is masked)."""
    return {
        "coverage/measured_rollouts": measured,
        "coverage/masked_rollouts": rollouts - measured,
        "coverage/measured_tasks": measured_tasks,
        "coverage/fully_masked_tasks": tasks - measured_tasks,
    }


def per_task_merger(per_task: Sequence[Mapping[str, Any]]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A change for the group entries: each gets the ``per_task_metrics`` entry of its task index."""
    by_task = {metrics[n.TASK_INDEX]: metrics for metrics in per_task}

    def merge(group: dict[str, Any]) -> dict[str, Any]:
        metrics = by_task.get(group.get(n.TASK_INDEX))
        if metrics is not None:
            group.update({name: json_safe(value) for name, value in metrics.items() if name != n.TASK_INDEX})
        return group

    return merge


def _is_finite_number(value: Any) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(float(value))


def group_by_task(rows: Sequence[Row]) -> list[list[Row]]:
    """Rows grouped by ``_ng_task_index`` (missing: 0), tasks in index order, rows in input order."""
    groups: dict[Any, list[Row]] = {}
    for row in rows:
        groups.setdefault(row.get(n.TASK_INDEX, 0), []).append(row)
    return [groups[task] for task in sorted(groups)]


def add_custom_repeat_metrics(
    scored: Sequence[Row],
    repeats: list[dict[str, Any]],
    agent_metrics: dict[str, Any],
    custom: Mapping[str, Any],
    compute_repeat_metrics: TasksHook,
) -> None:
    """Run the hook on each repeat's rows; its metrics replace same-named repeat fields (kept only when
    finite in every repeat and in the full-run answer), and their across-repeats summaries are redone."""
    by_repeat: dict[Any, list[Row]] = {}
    for row in scored:
        by_repeat.setdefault(row.get(n.ROLLOUT_INDEX, 0), []).append(row)
    answers = [dict(compute_repeat_metrics(group_by_task(by_repeat[entry[n.ROLLOUT_INDEX]]))) for entry in repeats]
    names: dict[str, None] = {}
    for repeat_answer in answers:
        names.update(dict.fromkeys(repeat_answer))
    if not names:
        return
    for name in names:
        values = [repeat_answer.get(name) for repeat_answer in answers]
        for entry in repeats:
            entry.pop(name, None)
        if (name not in custom or _is_finite_number(custom[name])) and all(map(_is_finite_number, values)):
            for entry, value in zip(repeats, values, strict=True):
                entry[name] = float(value)
    marker = f"{n.ACROSS_REPEATS}{n.SEPARATOR}"
    for key in list(agent_metrics):
        if marker in key and key.split(marker, 1)[1] in names:
            del agent_metrics[key]
    agent_metrics.update(across_repeats(repeats))
