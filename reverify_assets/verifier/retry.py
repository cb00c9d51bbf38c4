"""Which verifier failures are worth another try, and how long to wait before it."""

from __future__ import annotations

import random

from pydantic import BaseModel, Field

RETRYABLE_STATUSES = frozenset({408, 429})
_JITTER = random.Random()


class RetryPolicy(BaseModel):
    attempts: int = Field(default=4, ge=1, description="tries per request, the first included")
    base_delay_s: float = Field(default=0.25, ge=0)
    max_delay_s: float = Field(default=8.0, ge=0)
    timeout_s: float = Field(default=120.0, gt=0, description="per request")

    def delay(self, attempt: int, rng: random.Random | None = None) -> float:
        """Full-jitter exponential backoff: spreads the retries of many rows that failed together."""
        return (rng or _JITTER).uniform(0.0, min(self.max_delay_s, self.base_delay_s * (2**attempt)))


def is_retryable_status(status: int) -> bool:
    return status in RETRYABLE_STATUSES or status >= 500
