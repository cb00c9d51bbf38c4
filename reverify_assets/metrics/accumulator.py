"""NeMo Gym 0.7.0's ``/aggregate_metrics`` answer, built one verify response at a time.

Streaming: ``add(row)`` takes the rows in ``(_ng_task_index, _ng_rollout_index)`` order, one at a time
(ValueError on a duplicate scored key or on a key out of order). Only the current task's rows are held;
when a task completes its group entry is made and handed to the group store (a spool file by default),
the ``compute_metrics`` hook reduces it (see :mod:`hooks`), and what stays is a few bytes per row per
numeric column (see :mod:`profile_columns`). ``write_answer(fp)`` then writes the answer as JSON, the
group entries copied from the spool; ``answer()`` gives it as a dict.

In memory: ``add_all(rows)`` takes a whole run in any order, as NeMo Gym's route does.

How the answer is made:

1. Rows with a truthy ``mask_sample`` are *masked*: their reward is not a measurement, so every quality
   statistic is computed from the other (*scored*) rows. When any row is masked, ``coverage/*`` counts
   are added to agent_metrics and key_metrics. When every row is masked, those counts are all there is.
2. The reward profile of the scored rows (see :mod:`reward_profile`): group entries, the agent statistics
   with their ``*_across_repeats/*`` family, repeat entries.
3. ``compute_metrics`` (scored rows by task, tasks in index order, each task's rollouts in input order) is
   merged into agent_metrics; a ``per_task_metrics`` list in its answer is merged into the group entries
   of the same ``_ng_task_index`` instead.
4. ``num_repeats``: the number of distinct rollout indexes over *all* rows.
5. key_metrics: ``get_key_metrics(agent_metrics)``, by default every ``mean/*`` entry.
6. ``compute_repeat_metrics(tasks_of_one_repeat)``, if given, is run per repeat: its metrics replace the
   generic ones of the same name in the repeat entries and are summarised across repeats. (It takes
   lists, so the scored rows are kept for it.)
7. NaN and infinities become None, as pydantic writes them (JSON null): the answer is plain JSON.
8. ``perf_summary`` from the rows' ``ng_perf`` records (see :mod:`perf_summary`).

Differences from NeMo Gym, on input it cannot take either: a row without ``_ng_task_index`` /
``_ng_rollout_index`` counts as index 0 (NeMo Gym fails with a KeyError), and the duplicate-key
ValueError words its message differently.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import IO, Any

import orjson

from reverify_assets.metrics import answer_parts as parts
from reverify_assets.metrics import names as n
from reverify_assets.metrics.group_batch import GroupBatch
from reverify_assets.metrics.group_entry import as_not_all_int
from reverify_assets.metrics.group_store import Entry, GroupStore, SpooledGroups
from reverify_assets.metrics.hooks import Row, TaskReducer, TasksHook, reducer_for
from reverify_assets.metrics.json_safe import json_safe
from reverify_assets.metrics.perf_summary import PerfRecords
from reverify_assets.metrics.profile_columns import ProfileColumns
from reverify_assets.metrics.reward_profile import across_repeats, agent_metrics, repeat_level_metrics
from reverify_assets.metrics.row_numbers import read_row

KeyMetricsHook = Callable[[dict[str, Any]], Mapping[str, Any]]

_GROUPS = parts.ANSWER_KEYS[0]
_NONE: Any = object()  # no task / rollout read yet: equal to nothing


class MetricsAccumulator:
    """One ``/aggregate_metrics`` answer, rows in with :meth:`add` (or :meth:`add_all`), out with
    :meth:`write_answer` (or :meth:`answer`); the hooks are a resources server's (see :mod:`hooks`)."""

    def __init__(
        self,
        *,
        compute_metrics: TasksHook | None = None,
        get_key_metrics: KeyMetricsHook | None = None,
        compute_repeat_metrics: TasksHook | None = None,
        groups: GroupStore | None = None,
    ) -> None:
        """`groups` receives the group entries (default: a temporary spool file)."""
        self._reducer: TaskReducer | None = reducer_for(compute_metrics) if compute_metrics is not None else None
        self._get_key_metrics = get_key_metrics
        self._repeat_hook = compute_repeat_metrics
        self._repeat_rows: list[Row] = []
        self._groups: GroupStore = groups if groups is not None else SpooledGroups()
        self._batch = GroupBatch()  # completed tasks whose entries are not made yet
        self._int_groups = 0  # entries made while the table was all-int (a prefix of them)
        self._table = ProfileColumns()
        self._perf = PerfRecords()
        self._rollout_indexes: set[Any] = set()  # over every row, masked too
        self._rows = 0
        self._tasks = 0
        self._measured_tasks = 0
        self._task: Any = _NONE
        self._rollout: Any = _NONE
        self._task_rows: list[Row] = []
        self._sections: dict[str, Any] | None = None

    # --- Input ---------------------------------------------------------------------------------------------

    def add(self, row: Row) -> None:
        """The next verify response, in ``(_ng_task_index, _ng_rollout_index)`` order."""
        if self._sections is not None:
            self._check_open()
        task, rollout = row.get(n.TASK_INDEX, 0), row.get(n.ROLLOUT_INDEX, 0)
        if task == self._task:
            if rollout < self._rollout:
                raise ValueError(f"Verify response {(task, rollout)} out of key order: after {(task, self._rollout)}")
        elif self._task_rows:
            if task < self._task:
                raise ValueError(f"Verify response {(task, rollout)} out of key order: after task {self._task}")
            self._take_task(self._task_rows, in_key_order=True)
            self._task_rows = []
        self._task, self._rollout = task, rollout
        if "ng_perf" in row:
            self._add_perf(row)
        self._task_rows.append(row)

    def add_all(self, rows: Iterable[Row]) -> None:
        """A whole run at once, rows in any order (NeMo Gym's route): tasks are taken in index order, and
        the hook sees each task's rollouts in input order, as NeMo Gym's does. Only on a new accumulator."""
        self._check_open()
        if self._rows or self._task_rows:
            raise RuntimeError("add_all takes a whole run: rows were added already")
        by_task: dict[Any, list[Row]] = {}
        for row in rows:
            self._add_perf(row)
            by_task.setdefault(row.get(n.TASK_INDEX, 0), []).append(row)
        for task in sorted(by_task):
            self._take_task(by_task[task], in_key_order=False)

    def _check_open(self) -> None:
        if self._sections is not None:
            raise RuntimeError("the answer is already made: no more rows")

    def _add_perf(self, row: Row) -> None:
        record = row.get("ng_perf")
        if isinstance(record, dict):
            self._perf.add(record)

    def _take_task(self, rows: Sequence[Row], in_key_order: bool) -> None:
        """All rows of the next task (in input order, or key order when `in_key_order`)."""
        self._tasks += 1
        self._rows += len(rows)
        self._rollout_indexes.update(row.get(n.ROLLOUT_INDEX, 0) for row in rows)
        scored = [row for row in rows if not row.get(n.MASK_SAMPLE)]
        if not scored:
            return
        self._measured_tasks += 1
        ordered = scored if in_key_order else sorted(scored, key=lambda row: row.get(n.ROLLOUT_INDEX, 0))
        row_numbers, infos, rollouts = [], [], []
        for row in ordered:
            task, rollout = row.get(n.TASK_INDEX, 0), row.get(n.ROLLOUT_INDEX, 0)
            if rollouts and rollout == rollouts[-1]:
                raise ValueError(f"Duplicate verify response for rollout key {(task, rollout)}")
            numbers, info = read_row(task, rollout, row)
            row_numbers.append(numbers)
            infos.append(info)
            rollouts.append(rollout)
        column_values = self._table.add_task(row_numbers, rollouts)
        done = self._batch.add(ordered[0].get(n.TASK_INDEX, 0), column_values, self._table.all_int, infos)
        if done:
            self._groups.extend(done)
        if self._table.all_int:
            self._int_groups += 1
        if self._reducer is not None:
            self._reducer.add_task(scored)
        if self._repeat_hook is not None:
            self._repeat_rows.extend(scored)

    # --- Output --------------------------------------------------------------------------------------------

    def answer(self) -> dict[str, Any]:
        """The answer as a dict, in NeMo Gym's key order."""
        sections = self._finish()
        return {name: self._groups.entries() if name == _GROUPS else value for name, value in sections.items()}

    def write_answer(
        self,
        fp: IO[bytes],
        *,
        prefix_fields: Mapping[str, Any] | None = None,
        drop: Collection[str] = (),
        suffix_fields: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Write the answer to `fp` as one JSON object: `prefix_fields` first, then the answer's sections in
        NeMo Gym's order but those in `drop`, then `suffix_fields`. ``orjson.loads`` of it equals
        ``{**prefix_fields, **answer(), **suffix_fields}`` without `drop`, floats bit for bit. Returns what
        was written but the group entries, which can be as many as the rows: a summary a caller can keep."""
        sections = self._finish()
        prefix, suffix = dict(prefix_fields or {}), dict(suffix_fields or {})
        if clash := (set(prefix) | set(suffix)) & set(sections) or set(prefix) & set(suffix):
            raise ValueError(f"prefix or suffix fields {sorted(clash)} are sections of the answer, or both")
        fields = [
            *prefix.items(),
            *((name, value) for name, value in sections.items() if name not in drop),
            *suffix.items(),
        ]
        fp.write(b"{")
        for position, (name, value) in enumerate(fields):
            fp.write(b"," if position else b"")
            fp.write(orjson.dumps(name) + b":")
            if name == _GROUPS and value is _NONE:
                self._groups.write_json(fp)
            else:
                fp.write(orjson.dumps(value))
        fp.write(b"}")
        return {name: value for name, value in fields if name != _GROUPS}

    def close(self) -> None:
        """Release the group store (its temporary spool)."""
        self._groups.close()

    def __enter__(self) -> MetricsAccumulator:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _finish(self) -> dict[str, Any]:
        """The answer's sections, the group entries standing in the store (``_NONE`` in their place)."""
        if self._sections is None:
            if self._task_rows:
                self._take_task(self._task_rows, in_key_order=True)
                self._task_rows = []
            self._groups.extend(self._batch.flush())
            self._sections = self._sections_of_the_run()
        return self._sections

    def _sections_of_the_run(self) -> dict[str, Any]:
        if not self._rows:
            return parts.empty_answer()
        scored = self._table.rows
        coverage = (
            parts.coverage_metrics(self._rows, scored, self._tasks, self._measured_tasks) if scored < self._rows else {}
        )
        perf_summary = json_safe(self._perf.summary(self._rows))
        if not scored:
            return parts.answer([], dict(coverage), dict(coverage), perf_summary, [])

        agent = agent_metrics(self._table)
        repeats = repeat_level_metrics(self._table, self._measured_tasks)
        agent.update(across_repeats(repeats))
        agent.update(coverage)
        custom: dict[str, Any] = {}
        merge = None
        if self._reducer is not None:
            custom = dict(self._reducer.finish())
            per_task = custom.pop("per_task_metrics", None)
            if per_task:
                merge = parts.per_task_merger(per_task)
            agent.update(custom)
        made_int = 0 if self._table.all_int else self._int_groups
        if made_int or merge is not None:
            self._groups.rewrite(_late_change(made_int, merge))
        agent["num_repeats"] = len(self._rollout_indexes)

        key = dict(self._get_key_metrics(agent)) if self._get_key_metrics else parts.default_key_metrics(agent)
        key.update(coverage)
        if self._repeat_hook is not None and repeats:
            parts.add_custom_repeat_metrics(self._repeat_rows, repeats, agent, custom, self._repeat_hook)
        return parts.answer(_NONE, json_safe(agent), json_safe(key), perf_summary, json_safe(repeats))


def _late_change(made_int: int, merge: Callable[[Entry], Entry] | None) -> Callable[[int, Entry], Entry]:
    """What the group entries need once the run is known: floats for max/min in the first `made_int` (made
    while the table was all-int), then the hook's ``per_task_metrics``."""

    def change(position: int, entry: Entry) -> Entry:
        if position < made_int:
            entry = as_not_all_int(entry)
        return merge(entry) if merge is not None else entry

    return change
