"""Pass/fail flips of re-scored rows against the rewards their rollouts stored, counted one row at a time.

What ``reverify compare rollouts.jsonl output.jsonl`` gives in its 2×2 table, tallied as the rows stream
past (the verify loop, or one pass over an output), without holding a row: a few counters in all. Masked
rows (``mask_sample`` on either side) are left out, as the comparison leaves them out; rows without a
numeric reward on either side are counted, not compared. Standard library only: the verify loop imports it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class StoredRewardFlips:
    """Rows of the table are the stored (original) outcome, columns the new one."""

    both_pass: int = 0
    pass_to_fail: int = 0  # stored 1, now 0
    fail_to_pass: int = 0  # stored 0, now 1
    both_fail: int = 0
    non_binary: int = 0  # compared rows with a reward other than 0 or 1 on either side
    unpaired: int = 0  # rows without a numeric reward on one side (usually: the rollout stored none)
    masked: int = 0  # mask_sample on either side: the reward is not a measurement
    stored_sum: float = 0.0  # over the compared rows
    new_sum: float = 0.0

    def add(self, stored: float | None, new: float | None, *, masked: bool = False) -> None:
        """One scored row: the reward its rollout stored and the one it has now."""
        if masked:
            self.masked += 1
            return
        if stored is None or new is None:
            self.unpaired += 1
            return
        self.stored_sum += stored
        self.new_sum += new
        if stored == 1:
            if new == 1:
                self.both_pass += 1
                return
            if new == 0:
                self.pass_to_fail += 1
                return
        elif stored == 0:
            if new == 1:
                self.fail_to_pass += 1
                return
            if new == 0:
                self.both_fail += 1
                return
        self.non_binary += 1

    @property
    def compared(self) -> int:
        return self.both_pass + self.pass_to_fail + self.fail_to_pass + self.both_fail + self.non_binary

    @property
    def is_binary(self) -> bool:
        """Whether the 2×2 table holds every compared row (as ``reverify compare`` gives it only then)."""
        return self.compared > 0 and self.non_binary == 0

    @property
    def flips(self) -> int:
        return self.pass_to_fail + self.fail_to_pass

    @property
    def flip_rate(self) -> float | None:
        return self.flips / self.compared if self.is_binary else None

    @property
    def mean_stored(self) -> float | None:
        return self.stored_sum / self.compared if self.compared else None

    @property
    def mean_new(self) -> float | None:
        return self.new_sum / self.compared if self.compared else None

    @property
    def mean_delta(self) -> float | None:
        """Mean of (new − stored) over the compared rows."""
        return (self.new_sum - self.stored_sum) / self.compared if self.compared else None
