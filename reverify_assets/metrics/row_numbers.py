"""What NeMo Gym's RewardProfiler reads from one verify response: its numbers and its ``rollout_info``.

A row's numbers are its top-level fields with ``response.usage`` merged over them (``row | usage``, with
``mask_sample`` removed first): every value that is an int, a float or a bool (as 0/1), except fields
whose name starts with ``_``. Its ``rollout_info`` is its id and key, its reward as given, then the
numbers of its usage (whatever their name) and of its other fields (not ``_*``, ``response``,
``mask_sample``), non-finite floats as None.

This is the per-row cost of the whole aggregation, and a run's rows have a handful of shapes (field
names and value types, in order), so each shape is worked out once into a :class:`_Plan` that names the
few fields holding numbers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, NamedTuple

from reverify_assets.metrics.names import MASK_SAMPLE, RESPONSE, REWARD, ROLLOUT_INDEX, TASK_INDEX, USAGE
from reverify_assets.rows.row_fields import is_mapping

Number = int | float

_EMPTY: Mapping[str, Any] = {}
_PLANS_KEPT = 1024  # shapes remembered; rows of any other shape are worked out afresh


class _Plan(NamedTuple):
    """Where a shape's numbers are: ``(in_usage, name, is_bool)`` for each, in order."""

    numbers: tuple[tuple[bool, str, bool], ...]
    info: tuple[tuple[bool, str, bool], ...]  # after id, key and reward


_PLANS: dict[Any, _Plan] = {}


def usage_of(row: Mapping[str, Any]) -> Mapping[str, Any]:
    response = row.get(RESPONSE)
    usage = response.get(USAGE) if is_mapping(response) else None
    return usage if is_mapping(usage) else _EMPTY


def _is_number(kind: type) -> bool:
    return issubclass(kind, (int, float))  # bools too: they count as 0/1


def _plan(row: Mapping[str, Any], usage: Mapping[str, Any]) -> _Plan:
    row_numbers = [name for name, value in row.items() if _is_number(type(value))]
    usage_numbers = [name for name, value in usage.items() if _is_number(type(value))]
    merged: dict[str, tuple[bool, str, bool]] = {}
    for name, value in row.items():
        if name != MASK_SAMPLE:
            merged[name] = (False, name, type(value) is bool)
    for name, value in usage.items():
        merged[name] = (True, name, type(value) is bool)
    numbers = tuple(
        place
        for name, place in merged.items()
        if not name.startswith("_") and (name in usage_numbers if place[0] else name in row_numbers)
    )
    info = [(True, name, type(usage[name]) is bool) for name in usage_numbers]
    info += [
        (False, name, type(row[name]) is bool)
        for name in row_numbers
        if not name.startswith("_") and name not in (REWARD, RESPONSE, MASK_SAMPLE)
    ]
    return _Plan(numbers, tuple(info))


def _json_number(value: Any) -> Any:
    """:func:`json_safe.json_number`, inlined into the per-row pass."""
    return None if isinstance(value, float) and not math.isfinite(value) else value


def read_row(task: Any, rollout: Any, row: Mapping[str, Any]) -> tuple[dict[str, Number], dict[str, Any]]:
    """The row's numbers (``row | usage``) and its ``rollout_info``."""
    usage = usage_of(row)
    shape = (tuple(row), tuple(map(type, row.values())), tuple(usage), tuple(map(type, usage.values())))
    plan = _PLANS.get(shape)
    if plan is None:
        plan = _plan(row, usage)
        if len(_PLANS) < _PLANS_KEPT:
            _PLANS[shape] = plan
    numbers: dict[str, Number] = {}
    for in_usage, name, is_bool in plan.numbers:
        value = usage[name] if in_usage else row[name]
        numbers[name] = int(value) if is_bool else value
    info: dict[str, Any] = {"rollout_id": f"{task}:{rollout}", TASK_INDEX: task, ROLLOUT_INDEX: rollout}
    if REWARD in row:
        info[REWARD] = _json_number(row[REWARD])
    for in_usage, name, is_bool in plan.info:
        value = usage[name] if in_usage else row[name]
        info[name] = int(value) if is_bool else _json_number(value)
    return numbers, info
