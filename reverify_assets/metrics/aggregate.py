"""The answer of NeMo Gym 0.7.0's ``POST /aggregate_metrics`` for a list of stripped verify responses.

Shape, in NeMo Gym's key order::

    {"group_level_metrics": [...], "agent_metrics": {...}, "key_metrics": {...},
     "perf_summary": {...} | None, "repeat_level_metrics": [...]}

How it is made:

1. Rows with a truthy ``mask_sample`` are *masked*: their reward is not a measurement, so every quality
   statistic is computed from the other (*scored*) rows. When any row is masked, ``coverage/*`` counts
   are added to agent_metrics and key_metrics. When every row is masked, those counts are all there is.
2. The reward profile of the scored rows (see :mod:`reward_profile`): group entries, the agent statistics
   with their ``*_across_repeats/*`` family, repeat entries.
3. ``compute_metrics(tasks)`` (scored rows grouped by task index, tasks in index order, rollouts in input
   order) is merged into agent_metrics; a ``per_task_metrics`` list in its answer is merged into the group
   entries of the same ``_ng_task_index`` instead.
4. ``num_repeats``: the number of distinct rollout indexes over *all* rows.
5. key_metrics: ``get_key_metrics(agent_metrics)``, by default every ``mean/*`` entry.
6. ``compute_repeat_metrics(tasks_of_one_repeat)``, if given, is run per repeat: its metrics replace the
   generic ones of the same name in the repeat entries and are summarised across repeats.
7. NaN and infinities become None, as pydantic writes them (JSON null): the answer is plain JSON.

Differences from NeMo Gym, on input it cannot take either: a row without ``_ng_task_index`` /
``_ng_rollout_index`` counts as index 0 (NeMo Gym fails with a KeyError), and the duplicate-key
ValueError words its message differently.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from numbers import Real
from typing import Any

from reverify_assets.metrics import names as n
from reverify_assets.metrics.json_safe import json_safe
from reverify_assets.metrics.perf_summary import compute_perf_summary
from reverify_assets.metrics.profile_table import build_table, rollout_key
from reverify_assets.metrics.reward_profile import across_repeats, profile

Row = Mapping[str, Any]
TasksHook = Callable[[list[list[Row]]], Mapping[str, Any]]
KeyMetricsHook = Callable[[dict[str, Any]], Mapping[str, Any]]


def empty_answer() -> dict[str, Any]:
    """NeMo Gym's answer to an empty ``verify_responses``."""
    return _answer([], {}, {}, None, [])


def _answer(
    groups: list[dict[str, Any]],
    agent_metrics: dict[str, Any],
    key_metrics: dict[str, Any],
    perf_summary: dict[str, Any] | None,
    repeats: list[dict[str, Any]],
) -> dict[str, Any]:
    return {
        "group_level_metrics": groups,
        "agent_metrics": agent_metrics,
        "key_metrics": key_metrics,
        "perf_summary": perf_summary,
        "repeat_level_metrics": repeats,
    }


def aggregate_metrics(
    verify_responses: Sequence[Row],
    *,
    compute_metrics: TasksHook | None = None,
    get_key_metrics: KeyMetricsHook | None = None,
    compute_repeat_metrics: TasksHook | None = None,
) -> dict[str, Any]:
    """What a NeMo Gym resources server with these hooks answers to ``{"verify_responses": ...}``.

    Raises ValueError when two scored rows share ``(_ng_task_index, _ng_rollout_index)``.
    """
    if not verify_responses:
        return empty_answer()

    scored = [row for row in verify_responses if not row.get(n.MASK_SAMPLE)]
    masked_count = len(verify_responses) - len(scored)
    coverage = coverage_metrics(verify_responses, scored) if masked_count else {}
    perf_summary = compute_perf_summary(
        [row["ng_perf"] for row in verify_responses if isinstance(row.get("ng_perf"), dict)],
        total_rollouts=len(verify_responses),
    )
    if not scored:
        return _answer([], dict(coverage), dict(coverage), json_safe(perf_summary), [])

    result = profile(build_table(scored))
    agent_metrics = result.agent_metrics
    agent_metrics.update(coverage)

    custom: dict[str, Any] = {}
    if compute_metrics is not None:
        custom = dict(compute_metrics(group_by_task(scored)))
        per_task = custom.pop("per_task_metrics", None)
        if per_task:
            _merge_per_task_metrics(result.group_level_metrics, per_task)
        agent_metrics.update(custom)

    agent_metrics["num_repeats"] = len({row.get(n.ROLLOUT_INDEX, 0) for row in verify_responses})

    if get_key_metrics is not None:
        key_metrics = dict(get_key_metrics(agent_metrics))
    else:
        key_metrics = default_key_metrics(agent_metrics)
    key_metrics.update(coverage)

    if compute_repeat_metrics is not None and result.repeat_level_metrics:
        _add_custom_repeat_metrics(scored, result.repeat_level_metrics, agent_metrics, custom, compute_repeat_metrics)

    return _answer(
        result.group_level_metrics,
        json_safe(agent_metrics),
        json_safe(key_metrics),
        json_safe(perf_summary),
        json_safe(result.repeat_level_metrics),
    )


def baseline_metrics(verify_responses: Sequence[Row]) -> dict[str, Any]:
    """The answer of a server with no metric hooks: what we compute ourselves for a server that has no
    ``/aggregate_metrics``."""
    return aggregate_metrics(verify_responses)


def default_key_metrics(agent_metrics: Mapping[str, Any]) -> dict[str, Any]:
    """Every ``mean/*`` entry."""
    prefix = f"{n.MEAN}{n.SEPARATOR}"
    return {name: value for name, value in agent_metrics.items() if name.startswith(prefix)}


def group_by_task(rows: Sequence[Row]) -> list[list[Row]]:
    """Rows grouped by ``_ng_task_index`` (missing: 0), tasks in index order, rows in input order."""
    groups: dict[Any, list[Row]] = {}
    for row in rows:
        groups.setdefault(row.get(n.TASK_INDEX, 0), []).append(row)
    return [groups[task] for task in sorted(groups)]


def coverage_metrics(rows: Sequence[Row], scored: Sequence[Row]) -> dict[str, int]:
    """How much of the run the quality metrics were computed from (only published when a row is masked)."""
    tasks_total = {row.get(n.TASK_INDEX, 0) for row in rows}
    tasks_measured = {row.get(n.TASK_INDEX, 0) for row in scored}
    return {
        "coverage/measured_rollouts": len(scored),
        "coverage/masked_rollouts": len(rows) - len(scored),
        "coverage/measured_tasks": len(tasks_measured),
        "coverage/fully_masked_tasks": len(tasks_total - tasks_measured),
    }


def _merge_per_task_metrics(groups: list[dict[str, Any]], per_task: Sequence[Mapping[str, Any]]) -> None:
    by_task = {metrics[n.TASK_INDEX]: metrics for metrics in per_task}
    for group in groups:
        metrics = by_task.get(group.get(n.TASK_INDEX))
        if metrics is not None:
            group.update({name: json_safe(value) for name, value in metrics.items() if name != n.TASK_INDEX})


def _is_finite_number(value: Any) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(float(value))


def _add_custom_repeat_metrics(
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
        by_repeat.setdefault(rollout_key(row)[1], []).append(row)
    answers = [dict(compute_repeat_metrics(group_by_task(by_repeat[entry[n.ROLLOUT_INDEX]]))) for entry in repeats]
    names: dict[str, None] = {}
    for answer in answers:
        names.update(dict.fromkeys(answer))
    if not names:
        return
    for name in names:
        values = [answer.get(name) for answer in answers]
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
