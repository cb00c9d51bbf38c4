"""What a stored or re-scored row says about its reward: the number, and whether it is masked."""

from __future__ import annotations

from typing import Any

REWARD_FIELD = "reward"
MASK_SAMPLE = "mask_sample"


def numeric_reward(row: dict[str, Any]) -> float | None:
    """The row's ``reward`` when it is a number (``true`` is not a reward), else None."""
    reward = row.get(REWARD_FIELD)
    if type(reward) is float:  # nearly always
        return reward
    return float(reward) if isinstance(reward, int | float) and not isinstance(reward, bool) else None


def is_masked(row: dict[str, Any]) -> bool:
    return bool(row.get(MASK_SAMPLE))
