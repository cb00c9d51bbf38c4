"""Group entries made for a batch of completed tasks at a time.

A run's tasks mostly look alike: the same number of rollouts and the same numeric fields. For a batch
of such tasks the describe statistics (see :mod:`describe`) are computed at once, one numpy operation per
statistic and column over a tasks x rollouts array: ``add.reduce`` along a row is the same pairwise sum
as over a 1-D array, and the rest is element-wise arithmetic or order statistics, so the bits are those
of :func:`group_entry.group_entry`, which makes the entries of the other tasks: those of another shape
or of an all-int table, and those whose values hold a gap, an infinity or a -0.0 (max/min pick among
tied zeros by position).

A waiting task holds one list (its ``rollout_infos``) and its values in flat per-column lists: few
objects, and short-lived, so Python's cyclic collector does not promote them and then rescan the heap.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from reverify_assets.metrics import names as n
from reverify_assets.metrics.describe import DESCRIBE_STATS
from reverify_assets.metrics.group_entry import complete_entry, group_entry
from reverify_assets.metrics.row_numbers import Number

BATCH = 64

Entry = dict[str, Any]


class GroupBatch:
    """Completed tasks of one shape (rollout count, columns with a value) waiting for their entries."""

    def __init__(self) -> None:
        self._shape: tuple[int, tuple[str, ...]] | None = None
        self._tasks: list[Any] = []
        self._infos: list[list[dict[str, Any]]] = []
        self._values: list[list[Number]] = []  # per column, the tasks' values one after the other

    def add(
        self,
        task: Any,
        column_values: Sequence[tuple[str, list[Number]]],
        all_int: bool,
        rollout_infos: list[dict[str, Any]],
    ) -> list[Entry]:
        """Take one completed task; give the entries this completes, in task order (often none)."""
        shape = None if all_int else (len(rollout_infos), tuple(name for name, _ in column_values))
        done = self.flush() if shape != self._shape or len(self._tasks) >= BATCH else []
        if shape is None:
            done.append(group_entry(task, column_values, all_int, rollout_infos))
            return done
        if self._shape is None:
            self._shape = shape
            self._values = [[] for _ in column_values]
        self._tasks.append(task)
        self._infos.append(rollout_infos)
        for flat, (_, values) in zip(self._values, column_values, strict=True):
            flat.extend(values)
        return done

    def flush(self) -> list[Entry]:
        """The entries of every task waiting, in order."""
        if self._shape is None:
            return []
        (count, names), tasks, infos, flats = self._shape, self._tasks, self._infos, self._values
        self._shape, self._tasks, self._infos, self._values = None, [], [], []
        columns = [np.array(flat, dtype=np.float64).reshape(len(tasks), count) for flat in flats]
        stats, usable = _describe_alike(columns, len(tasks), count)
        keys = [n.stat_key(stat, name) for stat in DESCRIBE_STATS for name in names]
        entries = []
        for position, (row, ok) in enumerate(zip(stats.tolist(), usable.tolist(), strict=True)):
            if ok:
                entry: Entry = {n.TASK_INDEX: tasks[position]}
                entry.update(zip(keys, row, strict=True))
                entries.append(complete_entry(entry, infos[position]))
            else:
                values = [(name, column[position].tolist()) for name, column in zip(names, columns, strict=True)]
                entries.append(group_entry(tasks[position], values, False, infos[position]))
        return entries


def _describe_alike(columns: Sequence[np.ndarray], tasks: int, count: int) -> tuple[np.ndarray, np.ndarray]:
    """Each task's statistics (mean, max, min, median and std of each column, stat by stat) and whether
    they are the general way's."""
    means, maxima, minima, medians, stds = [], [], [], [], []
    usable = np.ones(tasks, dtype=bool)
    middle = count // 2
    for values in columns:
        usable &= np.isfinite(values).all(axis=1) & ~(np.signbit(values) & (values == 0)).any(axis=1)
        mean = np.add.reduce(values, axis=1) / count
        means.append(mean)
        maxima.append(values.max(axis=1))
        minima.append(values.min(axis=1))
        ordered = np.sort(values, axis=1)
        if count % 2:
            medians.append(0.0 + ordered[:, middle])
        else:
            medians.append((0.0 + ordered[:, middle - 1] + ordered[:, middle]) / 2)
        if count > 1:
            with np.errstate(over="ignore", invalid="ignore"):
                deviations = mean[:, None] - values
                stds.append(np.sqrt(np.add.reduce(deviations * deviations, axis=1) / (count - 1)))
        else:  # every std is NaN (one value): the gapless columns, all of them here, get 0.0
            stds.append(np.zeros(len(values)))
    stats = np.column_stack([*means, *maxima, *minima, *medians, *stds]) if columns else np.empty((tasks, 0))
    with np.errstate(invalid="ignore"):
        usable &= np.isfinite(stats).all(axis=1)
    return stats, usable
