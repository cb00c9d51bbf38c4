"""What a stored or re-scored row says about its reward: the number, and whether it is masked."""

from __future__ import annotations

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
