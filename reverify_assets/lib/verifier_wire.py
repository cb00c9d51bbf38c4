"""What our client and our servers agree on besides NeMo Gym's HTTP protocol: which verifier failures are worth
another try and how long to wait before it, the line a started built-in server announces itself with, and the
status of a stored pair that does not make a verify request."""

from __future__ import annotations

import random

from pydantic import BaseModel, Field

RETRYABLE_STATUSES = frozenset({408, 429})
READY_PREFIX = "LISTENING "  # then the server's URL, on its stdout (``servers.child_process``)
STALE_PAIR = 409  # ``/reverify_batch``: the two stored rows do not make a verify request for their key
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
