"""pass@k, pass@1[avg-of-k], majority@k and their spread, as NeMo Gym's ``compute_pass_majority_metrics``.

Input: rollouts grouped by task (``tasks[i]`` is task i's rollouts, in order). Each rollout is scored by
``score_fn`` into named scores (default ``{"accuracy": reward}``; bools count as 0/1). With an
``answer_key``, every rollout also gets the binary score ``no_answer`` (1 when its answer is None) and
majority@k votes on the answers. Every value is a percentage (0-100).

For each k from 1 to the largest number of rollouts of a task, and each score name in sorted order:

* ``pass@k/<s>``: over tasks with at least k scored rollouts; binary scores use the unbiased estimator
  ``1 - C(n_wrong, k) / C(n, k)`` (1 when ``n_wrong < k``), other scores the max of the first k;
* ``pass@1[avg-of-k]/<s>``: the mean over tasks of the mean of the first k scores;
* ``majority@k/<s>`` (with an answer key): among the first k rollouts with an answer, the most frequent
  (answer, score) pairs; ties average their scores; a task with no answer scores 0.

Then ``per_sample_aggregate`` (per score, pass@1 of each rollout position across tasks) and, for
k >= 2, ``pass@1[avg-of-k]/<s>/std_dev_across_runs`` (ddof 1 over the first k positions) and
``.../std_err_across_runs``.

Sums are :func:`python_sum` so the bits match NeMo Gym on Python >= 3.12. Scores are held per score name
and per task, never as one dict per rollout, so a million rollouts stay cheap.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from reverify_assets.metrics import names as n
from reverify_assets.metrics.summation import python_sum

NO_ANSWER = "no_answer"

ScoreFn = Callable[[Mapping[str, Any]], Mapping[str, Any]]
Tasks = Sequence[Sequence[Mapping[str, Any]]]


class _Missing:
    """The score a rollout does not have (its ``score_fn`` did not return that name)."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


class ScoreTable(NamedTuple):
    """``scores[name][task][rollout]`` (or MISSING), the answers by task and rollout, sorted score names."""

    scores: dict[str, list[list[Any]]]
    answers: list[list[Any]] | None
    names: list[str]
    max_k: int


class PassMajorityResult(NamedTuple):
    metrics: dict[str, Any]
    table: ScoreTable


def default_score_fn(rollout: Mapping[str, Any]) -> Mapping[str, Any]:
    return {"accuracy": rollout[n.REWARD]}


def _as_number(value: Any) -> Any:
    return int(value) if isinstance(value, bool) else value


def score_table(tasks: Tasks, score_fn: ScoreFn | None = None, answer_key: str | None = None) -> ScoreTable:
    """Score every rollout, one task at a time (only one task's score dicts are alive at once)."""
    score_fn = score_fn or default_score_fn
    by_name: dict[str, list[list[Any]]] = {}
    answers: list[list[Any]] | None = [] if answer_key is not None else None
    for done, rollouts in enumerate(tasks):
        task_scores = []
        for rollout in rollouts:
            scores = {name: _as_number(value) for name, value in score_fn(rollout).items()}
            if answer_key is not None:
                scores[NO_ANSWER] = 1 if rollout.get(answer_key) is None else 0
            task_scores.append(scores)
            for name in scores:
                if name not in by_name:
                    by_name[name] = [[MISSING] * len(previous) for previous in tasks[:done]]
        for name, column in by_name.items():
            column.append([scores.get(name, MISSING) for scores in task_scores])
        if answers is not None:
            answers.append([rollout.get(answer_key) for rollout in rollouts])
    ordered = sorted(by_name)
    max_k = max((len(rollouts) for rollouts in tasks), default=0)
    return ScoreTable({name: by_name[name] for name in ordered}, answers, ordered, max_k)


def compute_pass_majority_metrics(
    tasks: Tasks, score_fn: ScoreFn | None = None, answer_key: str | None = None
) -> PassMajorityResult:
    """The metrics (see the module doc) and the score table they came from; ``{}`` for no task."""
    if not tasks:
        return PassMajorityResult({}, ScoreTable({}, None, [], 0))
    table = score_table(tasks, score_fn, answer_key)
    metrics: dict[str, Any] = {}
    for k in range(1, table.max_k + 1):
        for name in table.names:
            by_task = table.scores[name]
            _put_percentage(metrics, f"pass@{k}/{name}", [_pass_at_k(_scored(task), k) for task in by_task])
            _put_percentage(metrics, f"pass@1[avg-of-{k}]/{name}", [_mean_first(task, k) for task in by_task])
            if table.answers is not None:
                _put_percentage(
                    metrics,
                    f"majority@{k}/{name}",
                    [_majority(answers, task, k) for answers, task in zip(table.answers, by_task, strict=True)],
                )
    per_sample = per_sample_aggregate(table)
    metrics["per_sample_aggregate"] = per_sample
    metrics.update(spread_across_runs(per_sample, table))
    return PassMajorityResult(metrics, table)


def _scored(task: Sequence[Any]) -> list[Any]:
    return [value for value in task if value is not MISSING]


def _put_percentage(metrics: dict[str, Any], key: str, values: Sequence[Any]) -> None:
    """``100 * mean`` of the tasks' values under `key`; tasks that have none (MISSING) do not count."""
    kept = [value for value in values if value is not MISSING]
    if kept:
        metrics[key] = 100.0 * python_sum(kept) / len(kept)


def _is_binary(values: Sequence[Any]) -> bool:
    return all(value in (0, 1, 0.0, 1.0) for value in values)


def _pass_at_k(values: Sequence[Any], k: int) -> Any:
    """One task's pass@k, or MISSING when it has fewer than k scored rollouts."""
    if not values or k > len(values):
        return MISSING
    if not _is_binary(values):
        return max(values[:k])
    wrong = sum(1 for value in values if not value)
    if wrong < k:
        return 1.0
    return 1.0 - math.comb(wrong, k) / math.comb(len(values), k)


def _mean_first(task: Sequence[Any], k: int) -> Any:
    values = _scored(task[:k])
    return python_sum(values) / len(values) if values else MISSING


def _majority(answers: Sequence[Any], task: Sequence[Any], k: int) -> Any:
    votes = [
        (answer, value)
        for answer, value in zip(answers[:k], task[:k], strict=False)
        if answer is not None and value is not MISSING
    ]
    if not votes:
        return 0
    counts = Counter(votes)
    top = counts.most_common(1)[0][1]
    tied = [value for (_, value), count in counts.items() if count == top]
    return python_sum(tied) / len(tied)


def per_sample_aggregate(table: ScoreTable) -> dict[str, list[float]]:
    """For each score name, pass@1 of each rollout position across the tasks that have it."""
    aggregate: dict[str, list[float]] = {name: [] for name in table.names}
    for position in range(table.max_k):
        for name in table.names:
            values = [
                task[position] for task in table.scores[name] if position < len(task) and task[position] is not MISSING
            ]
            if values:
                aggregate[name].append(100.0 * python_sum(values) / len(values))
    return {name: values for name, values in aggregate.items() if values}


def _sample_std(values: Sequence[float]) -> float:
    mean = python_sum(values) / len(values)
    return math.sqrt(python_sum((value - mean) ** 2 for value in values) / (len(values) - 1))


def spread_across_runs(per_sample: Mapping[str, Sequence[float]], table: ScoreTable) -> dict[str, float]:
    """``pass@1[avg-of-k]/<s>/std_dev_across_runs`` and ``.../std_err_across_runs`` for k >= 2: the spread
    of the first k rollout positions' pass@1."""
    spread: dict[str, float] = {}
    for k in range(2, table.max_k + 1):
        for name in table.names:
            runs = list(per_sample.get(name, []))[:k]
            if len(runs) >= 2:
                std_dev = _sample_std(runs)
                spread[f"pass@1[avg-of-{k}]/{name}/{n.STD_DEV_ACROSS_RUNS}"] = std_dev
                spread[f"pass@1[avg-of-{k}]/{name}/{n.STD_ERR_ACROSS_RUNS}"] = std_dev / math.sqrt(len(runs))
    return spread


def add_avg_sample_std_dev(metrics: dict[str, Any], table: ScoreTable) -> None:
    """Add ``pass@1[avg-of-k]/<s>/avg_sample_std_dev`` for k >= 2: the mean over tasks of the std (ddof 1)
    of each task's first k scores. Nothing when no task has two rollouts."""
    for k in range(2, table.max_k + 1):
        for name in table.names:
            stds = [_sample_std(values) for task in table.scores[name] if len(values := _scored(task[:k])) >= 2]
            if stds:
                metrics[f"pass@1[avg-of-{k}]/{name}/{n.AVG_SAMPLE_STD_DEV}"] = python_sum(stds) / len(stds)


def compute_subset_metrics(
    tasks: Tasks, subset_key: str, score_fn: ScoreFn | None = None, answer_key: str | None = None
) -> dict[str, Any]:
    """The metrics again within each subset of tasks (a task's subset: the first truthy `subset_key` among
    its rollouts), keyed ``<subset>/<metric>``, without ``per_sample_aggregate``."""
    subsets: dict[Any, list[Sequence[Mapping[str, Any]]]] = {}
    for rollouts in tasks:
        value = next((rollout[subset_key] for rollout in rollouts if rollout.get(subset_key)), None)
        if value:
            subsets.setdefault(value, []).append(rollouts)
    metrics: dict[str, Any] = {}
    for subset, subset_tasks in subsets.items():
        subset_metrics = compute_pass_majority_metrics(subset_tasks, score_fn, answer_key).metrics
        metrics.update(
            {f"{subset}/{key}": value for key, value in subset_metrics.items() if key != "per_sample_aggregate"}
        )
    return metrics


def highest_k_metrics(
    agent_metrics: Mapping[str, Any],
    pattern: str,
    score_names: Sequence[str] | None = None,
    exclude_names: Sequence[str] | None = None,
) -> dict[str, Any]:
    """The entries matching `pattern` (``{k}`` stands for k, e.g. ``"pass@1[avg-of-{k}]"``) at the highest
    k, in `agent_metrics` order. The spread statistics never count; `score_names` keeps only those score
    names, then `exclude_names` drops some."""
    parts = [re.escape(part) for part in pattern.split("{k}")]
    regex = re.compile("^" + r"(\d+)".join(parts) + "/(.+)$")
    matches: list[tuple[int, str]] = []
    for key in agent_metrics:
        match = regex.match(key)
        if not match:
            continue
        score = match.group(match.lastindex or 0)
        if score.endswith(n.PASS_MAJORITY_STATS):
            continue
        if score_names is not None and score not in score_names:
            continue
        if exclude_names is not None and score in exclude_names:
            continue
        matches.append((int(match.group(1)), key))
    if not matches:
        return {}
    top = max(k for k, _ in matches)
    return {key: agent_metrics[key] for k, key in matches if k == top}
