"""What our client and our servers agree on besides NeMo Gym's HTTP protocol: which verifier failures are worth
another try and how long to wait before it, the loopback socket a server we start listens on and the line it
announces itself with, the status of a stored pair that does not make a verify request, and how long a throttled
reply asks us to wait."""

from __future__ import annotations

import email.utils
import math
import random
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

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


THROTTLED_STATUSES = frozenset({429, 503})
# A server that asks for longer than this, per call in all, is out of quota rather than busy: its rows fail.
MAX_THROTTLED_WAIT_S = 300.0
# What one wait counts for against that budget at least: a server saying "Retry-After: 0" again and again gets
# a few hundred free retries of a call, not an endless loop.
LEAST_COUNTED_WAIT_S = 1.0


@dataclass(slots=True)
class ThrottleWaits:
    """How long one call has waited at a server's request (``Retry-After``), within ``MAX_THROTTLED_WAIT_S``."""

    waited_s: float = 0.0
    granted: bool = False  # the last reply asked to wait, and the call may: retry without spending an attempt

    def take(self, wait_s: float) -> bool:
        counted = max(wait_s, LEAST_COUNTED_WAIT_S)
        self.granted = self.waited_s + counted <= MAX_THROTTLED_WAIT_S
        if self.granted:
            self.waited_s += counted
        return self.granted


def is_throttled(status: int, wait_s: float | None) -> bool:
    """A 429, or a 503 saying when to come back: the server is busy, not broken. A bare 503 is an error, and
    cutting the requests in flight for each would leave a judge that fails 2 % of calls at a sixth of its speed."""
    return status == 429 or (status == 503 and wait_s is not None)


def asked_wait_s(status: int, headers: Mapping[str, str]) -> float | None:
    """How long a reply of ``status`` asks us to wait before the next call: only a throttling status asks."""
    return retry_after_s(headers) if status in THROTTLED_STATUSES else None


def retry_after_s(headers: Mapping[str, str]) -> float | None:
    """How long a throttled reply asks us to wait: OpenAI's ``retry-after-ms``, else ``Retry-After`` in seconds
    or as an HTTP date; None when it does not say (or says nonsense)."""
    if (milliseconds := _number(headers.get("retry-after-ms"))) is not None:
        return milliseconds / 1000
    value = headers.get("retry-after")
    if value is None:
        return None
    if (seconds := _number(value)) is not None:
        return seconds
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _number(value: str | None) -> float | None:
    try:
        number = float(value) if value is not None else None
    except ValueError:
        return None
    return number if number is not None and math.isfinite(number) and number >= 0 else None


LOOPBACK = "127.0.0.1"


def bind_loopback(port: int = 0) -> socket.socket:
    """Bind before serving so the kernel picks a free port with no window for another process to take it."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((LOOPBACK, port))
    sock.listen(1024)
    return sock
