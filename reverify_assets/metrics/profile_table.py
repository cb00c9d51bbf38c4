"""The numbers NeMo Gym's RewardProfiler reads from verify responses, held column by column.

One row per verify response, sorted by ``(_ng_task_index, _ng_rollout_index)``. A row's numbers are its
top-level fields with ``response.usage`` merged over them (``row | usage``): every value that is an
int, a float or a bool (as 0/1), except fields whose name starts with ``_``. A field a row lacks is NaN
in its column. Columns keep the order in which their field first appears.

Each column is an ``array('d')``: eight bytes a row whatever the number of rows.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from reverify_assets.metrics.json_safe import json_number
from reverify_assets.metrics.names import MASK_SAMPLE, RESPONSE, REWARD, ROLLOUT_INDEX, TASK_INDEX, USAGE

_NAN = float("nan")


@dataclass
class ProfileTable:
    """Sorted rollout keys, numeric columns aligned with them, and each row's compact ``rollout_info``."""

    keys: list[tuple[Any, Any]]
    columns: dict[str, array]
    # pandas keeps an all-int frame int64, so its max/min stay ints; any float or gap makes them floats.
    all_int: bool
    rollout_infos: list[dict[str, Any]]

    def task_ranges(self) -> Iterator[tuple[Any, int, int]]:
        """``(task, start, stop)`` for each task, in task order: rows ``start:stop`` are its rollouts."""
        start = 0
        for position in range(1, len(self.keys) + 1):
            if position == len(self.keys) or self.keys[position][0] != self.keys[start][0]:
                yield self.keys[start][0], start, position
                start = position

    def rows_by_rollout(self) -> dict[Any, list[int]]:
        """Row positions of each rollout index, rollout indexes ascending, rows in table order."""
        positions: dict[Any, list[int]] = {}
        for position, (_, rollout) in enumerate(self.keys):
            positions.setdefault(rollout, []).append(position)
        return {rollout: positions[rollout] for rollout in sorted(positions)}


def rollout_key(row: Mapping[str, Any]) -> tuple[Any, Any]:
    return row.get(TASK_INDEX, 0), row.get(ROLLOUT_INDEX, 0)


def build_table(rows: Sequence[Mapping[str, Any]]) -> ProfileTable:
    """The table of `rows` (verify responses none of which is masked).

    Raises ValueError when two rows share a rollout key, as NeMo Gym's profiler does.
    """
    order = sorted(range(len(rows)), key=lambda position: rollout_key(rows[position]))
    keys = [rollout_key(rows[position]) for position in order]
    for previous, current in pairwise(keys):
        if previous == current:
            raise ValueError(f"Duplicate verify response for rollout key {current}")

    columns: dict[str, array] = {}
    all_int = True
    rollout_infos: list[dict[str, Any]] = []
    for count, position in enumerate(order):
        row = rows[position]
        usage = _usage(row)
        numbers = _numbers(row, usage)
        for name in numbers:
            if name not in columns:
                columns[name] = array("d", [_NAN]) * count
                all_int = all_int and count == 0
        for name, column in columns.items():
            value = numbers.get(name)
            if value is None:
                all_int = False
                column.append(_NAN)
            else:
                all_int = all_int and type(value) is int
                column.append(value)
        rollout_infos.append(_rollout_info(keys[count], row, usage))
    return ProfileTable(keys, columns, all_int, rollout_infos)


def _usage(row: Mapping[str, Any]) -> Mapping[str, Any]:
    response = row.get(RESPONSE)
    usage = response.get(USAGE) if isinstance(response, Mapping) else None
    return usage if isinstance(usage, Mapping) else {}


def _number(value: Any) -> int | float | None:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)):
        return value
    return None


def _numbers(row: Mapping[str, Any], usage: Mapping[str, Any]) -> dict[str, int | float]:
    """``row | usage`` (``mask_sample`` removed first), kept to numbers under names not starting
    with ``_``."""
    numbers: dict[str, int | float] = {}
    merged = {name: value for name, value in row.items() if name != MASK_SAMPLE}
    merged.update(usage)
    for name, value in merged.items():
        number = None if name.startswith("_") else _number(value)
        if number is not None:
            numbers[name] = number
    return numbers


def _rollout_info(key: tuple[Any, Any], row: Mapping[str, Any], usage: Mapping[str, Any]) -> dict[str, Any]:
    """A row's entry in ``rollout_infos``: id, key, reward as given, then usage and other numbers."""
    task, rollout = key
    info: dict[str, Any] = {"rollout_id": f"{task}:{rollout}", TASK_INDEX: task, ROLLOUT_INDEX: rollout}
    if REWARD in row:
        info[REWARD] = json_number(row[REWARD])
    for name, value in usage.items():
        number = _number(value)
        if number is not None:
            info[name] = json_number(number)
    for name, value in row.items():
        if name.startswith("_") or name in (REWARD, RESPONSE, MASK_SAMPLE):
            continue
        number = _number(value)
        if number is not None:
            info[name] = json_number(number)
    return info
