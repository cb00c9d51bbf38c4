"""The numbers NeMo Gym's RewardProfiler reads from the scored verify responses, held column by column.

Rows arrive a task at a time, in ``(_ng_task_index, _ng_rollout_index)`` order. Each numeric field (see
:mod:`row_numbers`) is a :class:`CompactColumn` with a gap wherever a row lacks it; columns keep the order
in which their field first appears. Each row's rollout index is kept as a small code, for the repeat
entries. That is all that is kept of a row: one to eight bytes per column.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from reverify_assets.metrics.compact_column import CompactColumn
from reverify_assets.metrics.row_numbers import Number

_NAN = float("nan")


class ProfileColumns:
    def __init__(self) -> None:
        self.columns: dict[str, CompactColumn] = {}
        self.rows = 0
        # pandas keeps an all-int frame int64, so its max/min stay ints; any float or gap makes them floats.
        self.all_int = True
        self.rollout_values: list[Any] = []  # distinct rollout indexes, by code
        self.rollout_codes = CompactColumn()
        self._rollout_code: dict[Any, int] = {}

    def add_task(self, rows: Sequence[Mapping[str, Number]], rollouts: Sequence[Any]) -> list[tuple[str, list[Number]]]:
        """Append one task's rows (their numbers, in key order) and rollout indexes; give the values of
        each column that has one in these rows, NaN for a gap, columns in table order."""
        columns = self.columns
        first = self.rows
        for offset, numbers in enumerate(rows):
            for name in numbers:
                if name not in columns:
                    column = columns[name] = CompactColumn()
                    column.extend_missing(first)  # this task's rows are appended below, gaps and all
                    if first + offset:
                        self.all_int = False
        task_values = []
        all_int = self.all_int
        for name, column in columns.items():
            values = [numbers.get(name, _NAN) for numbers in rows]
            column.extend(values)
            if all_int:
                all_int = all(type(value) is int for value in values)
            # Counts the gaps put in above; a NaN value, also a gap, is left to the statistics to skip.
            if values.count(_NAN) < len(values):
                task_values.append((name, values))
        self.all_int = all_int
        codes = self._rollout_code
        for rollout in rollouts:
            if rollout not in codes:
                codes[rollout] = len(self.rollout_values)
                self.rollout_values.append(rollout)
        self.rollout_codes.extend([codes[rollout] for rollout in rollouts])
        self.rows += len(rows)
        return task_values
