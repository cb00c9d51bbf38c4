"""What the per-row paths read of a result row: its reward and whether it is masked, whether a value is a JSON
object (cheaply), and the row less what NeMo Gym never sends to ``/aggregate_metrics``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

REWARD_FIELD = "reward"
MASK_SAMPLE = "mask_sample"


def numeric_reward(row: dict[str, Any]) -> float | None:
    """The row's ``reward`` when it is a number (``true`` is not a reward), else None."""
    return reward_number(row.get(REWARD_FIELD))


def reward_number(value: Any) -> float | None:
    """``value`` as a reward: a float when it is a number (``true`` is not one), else None."""
    if type(value) is float:  # nearly always
        return value
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def is_masked(row: dict[str, Any]) -> bool:
    return bool(row.get(MASK_SAMPLE))


def is_mapping(value: Any) -> bool:
    """``isinstance(value, Mapping)``, with parsed JSON's own ``dict`` checked first: the check against the
    Mapping ABC costs more than the rest of what a per-row path does with a small object."""
    return type(value) is dict or isinstance(value, Mapping)


NOT_SENT_TO_AGGREGATION = (
    "responses_create_params",
    "ng_agent_observations",
    "ng_model_call_capture",
    "ng_trajectory",
)


def strip_for_aggregation(row: dict[str, Any]) -> dict[str, Any]:
    """A copy less those fields, ``response`` reduced to its ``usage``; stripping a stripped row changes nothing."""
    # A copy less four fields: cheaper than a comprehension over every field, and the order is the same.
    stripped = dict(row)
    for name in NOT_SENT_TO_AGGREGATION:
        stripped.pop(name, None)
    response = row.get("response")
    if is_mapping(response):
        stripped["response"] = {"usage": response.get("usage")}
    return stripped
