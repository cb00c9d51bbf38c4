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
``.../std_err_across_runs``; optionally ``pass@1[avg-of-k]/<s>/avg_sample_std_dev`` (the mean over tasks
of the std of each task's first k scores).

:class:`PassMajority` computes them a task at a time. A task's values for every k (its *row*) depend
only on its scores, on which of its answers are equal and on the largest k, and runs repeat such tasks,
so rows are shared; they are folded a few thousand tasks at a time into one :class:`RunningSum` per
metric (CPython >= 3.12's ``sum``, so the bits match NeMo Gym). All that is kept per task is its value at
its own length of the families that go on past it (avg-of-k, majority@k, avg_sample_std_dev: a task
shorter than k counts with all its rollouts), in compact columns, for when a later task brings a larger k.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import chain
from operator import attrgetter, itemgetter
from typing import Any, NamedTuple

from reverify_assets.metrics import names as n
from reverify_assets.metrics.compact_column import MISSING, CompactColumn
from reverify_assets.metrics.hooks import Tasks
from reverify_assets.metrics.summation import RunningSum, python_sum

NO_ANSWER = "no_answer"

ScoreFn = Callable[[Mapping[str, Any]], Mapping[str, Any]]

# Per-task values wait in lists and are folded into their running sums this many tasks at a time.
_FOLD_EVERY = 4096
_KNOWN_ROWS = 1 << 16


def default_score_fn(rollout: Mapping[str, Any]) -> Mapping[str, Any]:
    return {"accuracy": rollout[n.REWARD]}


def _as_number(value: Any) -> Any:
    return int(value) if type(value) is bool else value


class _Mean:
    """The running sum and count of a metric's per-task values."""

    __slots__ = ("count", "sum")

    def __init__(self) -> None:
        self.sum = RunningSum()
        self.count = 0

    def add(self, values: Iterable[Any]) -> None:
        """Values of successive tasks; MISSING ones do not count."""
        kept = [value for value in values if value is not MISSING]
        self.count += len(kept)
        self.sum.extend(kept)

    def percentage(self) -> float | None:
        return 100.0 * self.sum.total / self.count if self.count else None


class _TaskRow(NamedTuple):
    """A task's contribution to one score name while the largest k is `max_k`: its value for each k of
    each family (MISSING where it has none), its scores by rollout position, its saturated values."""

    pass_at: tuple[Any, ...]  # k = 1 .. max_k
    avg_of: tuple[Any, ...]
    majority: tuple[Any, ...] | None  # None without an answer key
    std_of: tuple[Any, ...] | None  # k = 2 .. max_k; None unless asked for
    per_sample: tuple[Any, ...]  # rollout positions 0 .. max_k - 1
    saturated: tuple[Any, Any, Any]  # avg, majority and std at any k >= the task's length


_FAMILIES = range(5)  # the per-k fields of a _TaskRow


class _Score:
    """One score name: the sums of each family (one per k, or per rollout position), the rows of the
    tasks not yet folded into them, and every task's saturated values for a later, larger k."""

    def __init__(self, with_majority: bool, with_std: bool) -> None:
        self.families: tuple[list[_Mean], ...] = ([], [], [], [], [])
        self.pending: list[_TaskRow] = []
        self.saturated = (
            CompactColumn(keep_types=True),
            CompactColumn(keep_types=True) if with_majority else None,
            CompactColumn(keep_types=True) if with_std else None,
        )

    def fold(self) -> None:
        rows, self.pending = self.pending, []
        if not rows:
            return
        for family, means in zip(_FAMILIES, self.families, strict=True):
            if rows[0][family] is not None:
                # The rows' values one task after another: those of the k-th sum are every len(means)-th.
                flat = list(chain.from_iterable(map(itemgetter(family), rows)))
                for k, mean in enumerate(means):
                    mean.add(flat[k :: len(means)])
        flat = list(chain.from_iterable(map(attrgetter("saturated"), rows)))
        for position, column in enumerate(self.saturated):
            if column is not None:
                column.extend(flat[position :: len(self.saturated)])

    def add_k(self, k: int) -> None:
        """Open the sums of a new, larger k (after a fold): the tasks so far are all shorter, so they
        count with their saturated values, and never for pass@k."""
        pass_at, avg_of, majority, std_of, per_sample = self.families
        saturated_avg, saturated_majority, saturated_std = self.saturated
        pass_at.append(_Mean())
        avg_of.append(_Mean())
        avg_of[-1].add(saturated_avg.values())
        majority.append(_Mean())
        if saturated_majority is not None:
            majority[-1].add(saturated_majority.values())
        per_sample.append(_Mean())
        if saturated_std is not None and k >= 2:
            std_of.append(_Mean())
            std_of[-1].add(saturated_std.values())


class PassMajority:
    """The metrics of the module doc, fed one task at a time (a :class:`~hooks.TaskReducer`)."""

    def __init__(
        self, score_fn: ScoreFn | None = None, answer_key: str | None = None, *, avg_sample_std_dev: bool = False
    ) -> None:
        self._score_fn = score_fn or default_score_fn
        self._answer_key = answer_key
        self._with_std = avg_sample_std_dev
        self._scores: dict[str, _Score] = {}
        self._tasks = 0
        self._max_k = 0
        # Tasks repeat themselves: a task's row depends only on its scores (with their types), on which of
        # its answers are equal, and on max_k; a run has few such combinations.
        self._rows: dict[Any, _TaskRow] = {}

    def add_task(self, rollouts: Sequence[Mapping[str, Any]]) -> None:
        answers = [rollout.get(self._answer_key) for rollout in rollouts] if self._answer_key is not None else None
        columns = self._score_columns(rollouts, answers)
        for name in columns:
            if name not in self._scores:
                self._add_name(name)
        if len(rollouts) > self._max_k:
            self._grow(len(rollouts))
        pattern = _answer_pattern(answers)
        for name, score in self._scores.items():
            values = columns.get(name) or [MISSING] * len(rollouts)
            key = (tuple(values), tuple(map(type, values)), pattern)
            row = self._rows.get(key)
            if row is None:
                row = task_row(values, answers, self._with_std, self._max_k)
                if len(self._rows) < _KNOWN_ROWS:
                    self._rows[key] = row
            score.pending.append(row)
        self._tasks += 1
        if self._tasks % _FOLD_EVERY == 0:
            self._fold()

    def _score_columns(self, rollouts: Sequence[Mapping[str, Any]], answers: list[Any] | None) -> dict[str, list[Any]]:
        """Each score name's values over the task's rollouts (MISSING where a rollout has none)."""
        if self._score_fn is default_score_fn:  # one score, always there: no dict per rollout
            columns = {"accuracy": [_as_number(rollout[n.REWARD]) for rollout in rollouts]}
        else:
            by_rollout = [{name: _as_number(value) for name, value in self._score_fn(r).items()} for r in rollouts]
            names = dict.fromkeys(name for scores in by_rollout for name in scores)
            columns = {name: [scores.get(name, MISSING) for scores in by_rollout] for name in names}
        if answers is not None:
            columns[NO_ANSWER] = [1 if answer is None else 0 for answer in answers]
        return columns

    def _fold(self) -> None:
        for score in self._scores.values():
            score.fold()

    def _grow(self, max_k: int) -> None:
        self._fold()
        self._rows.clear()
        while self._max_k < max_k:
            self._max_k += 1
            for score in self._scores.values():
                score.add_k(self._max_k)

    def _add_name(self, name: str) -> None:
        """A score name first seen now: every task before has MISSING for it (no value, majority 0)."""
        score = _Score(self._answer_key is not None, self._with_std)
        saturated_avg, saturated_majority, saturated_std = score.saturated
        saturated_avg.extend_missing(self._tasks)
        if saturated_majority is not None:
            saturated_majority.extend([0] * self._tasks)
        if saturated_std is not None:
            saturated_std.extend_missing(self._tasks)
        for k in range(1, self._max_k + 1):
            score.add_k(k)
        self._scores[name] = score

    def finish(self) -> dict[str, Any]:
        if not self._tasks:
            return {}
        self._fold()
        names = sorted(self._scores)
        families = [self._scores[name].families for name in names]
        metrics: dict[str, Any] = {}
        for k in range(1, self._max_k + 1):
            for name, (pass_at, avg_of, majority, _, _) in zip(names, families, strict=True):
                _put(metrics, f"pass@{k}/{name}", pass_at[k - 1].percentage())
                _put(metrics, f"pass@1[avg-of-{k}]/{name}", avg_of[k - 1].percentage())
                if self._answer_key is not None:
                    _put(metrics, f"majority@{k}/{name}", majority[k - 1].percentage())
        per_sample = {
            name: [value for mean in family[4] if (value := mean.percentage()) is not None]
            for name, family in zip(names, families, strict=True)
        }
        per_sample = {name: values for name, values in per_sample.items() if values}
        metrics["per_sample_aggregate"] = per_sample
        metrics.update(spread_across_runs(per_sample, names, self._max_k))
        if self._with_std:
            for k in range(2, self._max_k + 1):
                for name, family in zip(names, families, strict=True):
                    mean = family[3][k - 2]
                    if mean.count:
                        metrics[f"pass@1[avg-of-{k}]/{name}/{n.AVG_SAMPLE_STD_DEV}"] = mean.sum.total / mean.count
        return metrics


def task_row(values: Sequence[Any], answers: Sequence[Any] | None, with_std: bool, max_k: int) -> _TaskRow:
    """A task's row for one score name, from its scores (MISSING where none) and answers."""
    scored = [value for value in values if value is not MISSING]
    passes: list[Any] = [MISSING] * max_k
    if scored and _is_binary(scored):
        total = len(scored)
        wrong = sum(1 for value in scored if not value)
        for k in range(1, total + 1):
            passes[k - 1] = 1.0 if wrong < k else 1.0 - math.comb(wrong, k) / math.comb(total, k)
    else:
        for k in range(1, len(scored) + 1):
            passes[k - 1] = max(scored[:k])

    # The other families by prefix; past the task's length, k counts all its rollouts (saturation).
    averages: list[Any] = []
    majorities: list[Any] = []
    stds: list[Any] = []
    prefix: list[Any] = []
    votes: dict[tuple[Any, Any], int] = {}
    average: Any = MISSING
    majority: Any = 0
    std: Any = MISSING
    for position in range(max_k):
        if position < len(values):
            value = values[position]
            if value is not MISSING:
                prefix.append(value)
                average = python_sum(prefix) / len(prefix)
                if with_std and len(prefix) >= 2:
                    std = _sample_std(prefix)
            if answers is not None:
                answer = answers[position]
                if answer is not None and value is not MISSING:
                    votes[(answer, value)] = votes.get((answer, value), 0) + 1
                    majority = _majority(votes)
        averages.append(average)
        majorities.append(majority)
        stds.append(std)
    return _TaskRow(
        tuple(passes),
        tuple(averages),
        tuple(majorities) if answers is not None else None,
        tuple(stds[1:]) if with_std else None,
        (*values, *[MISSING] * (max_k - len(values))),
        (average, majority, std),
    )


def _answer_pattern(answers: Sequence[Any] | None) -> tuple[Any, ...] | None:
    """Which answers are equal, and which are None: all that majority@k reads of them."""
    if answers is None:
        return None
    labels: dict[Any, Any] = {answer: label for label, answer in enumerate(dict.fromkeys(answers))}
    labels[None] = None
    return tuple(map(labels.__getitem__, answers))


def compute_pass_majority_metrics(
    tasks: Tasks, score_fn: ScoreFn | None = None, answer_key: str | None = None, *, avg_sample_std_dev: bool = False
) -> dict[str, Any]:
    """The metrics of the module doc; ``{}`` for no task."""
    reducer = PassMajority(score_fn, answer_key, avg_sample_std_dev=avg_sample_std_dev)
    for rollouts in tasks:
        reducer.add_task(rollouts)
    return reducer.finish()


def _put(metrics: dict[str, Any], key: str, value: float | None) -> None:
    """A metric that some task has a value for (tasks without one, MISSING, do not count)."""
    if value is not None:
        metrics[key] = value


def _is_binary(values: Sequence[Any]) -> bool:
    return all(value in (0, 1, 0.0, 1.0) for value in values)


def _majority(votes: Mapping[tuple[Any, Any], int]) -> float:
    """The mean score of the most frequent (answer, score) pairs, ties in first-vote order."""
    top = max(votes.values())
    tied = [value for (_, value), count in votes.items() if count == top]
    return python_sum(tied) / len(tied)


def _sample_std(values: Sequence[float]) -> float:
    mean = python_sum(values) / len(values)
    return math.sqrt(python_sum((value - mean) ** 2 for value in values) / (len(values) - 1))


def spread_across_runs(per_sample: Mapping[str, Sequence[float]], names: Sequence[str], max_k: int) -> dict[str, float]:
    """``pass@1[avg-of-k]/<s>/std_dev_across_runs`` and ``.../std_err_across_runs`` for k >= 2: the spread
    of the first k rollout positions' pass@1."""
    spread: dict[str, float] = {}
    for k in range(2, max_k + 1):
        for name in names:
            runs = list(per_sample.get(name, []))[:k]
            if len(runs) >= 2:
                std_dev = _sample_std(runs)
                spread[f"pass@1[avg-of-{k}]/{name}/{n.STD_DEV_ACROSS_RUNS}"] = std_dev
                spread[f"pass@1[avg-of-{k}]/{name}/{n.STD_ERR_ACROSS_RUNS}"] = std_dev / math.sqrt(len(runs))
    return spread


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
        subset_metrics = compute_pass_majority_metrics(subset_tasks, score_fn, answer_key)
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
