"""How the local judge model misbehaves on purpose: the knobs of ``reverify judge-serve`` and ``POST /control``.

* ``fail_status`` (default 503): the HTTP status of an injected failure (any 4xx or 5xx; 401 imitates a bad key).
* ``fail_share`` (0..1): the share of requests that fail. Which ones is decided by a hash of ``seed`` and the
  request's messages, so within one configuration the same prompt always fails (retries do not help) and
  the same prompts fail on every run.
* ``seed``: picks *which* requests the share hits, and starts the draws of ``flip_share``.
* ``flip_share`` (0..1): each verdict is turned into its opposite with this chance, drawn afresh for every
  request: a nondeterministic judge, whose verdict on the same prompt may differ from one call to the next (the
  judge's noise that ``reverify noise`` measures).
* ``latency_ms``: waited before every chat-completion answer.
* ``rate_limit_rps``: answers at most this many requests a second (a bucket of one second's worth); the rest
  get HTTP 429 with ``Retry-After`` (whole seconds) and OpenAI's ``retry-after-ms``, as a throttling provider does.
* ``outage`` ``START:END`` (seconds; ``END`` may be empty for "until changed"): every request in that window
  fails with ``fail_status``. The window counts from when the setting took effect: the server's start for the
  command line, the ``/control`` call for a runtime change (so ``{"outage": "0:"}`` starts one now and
  ``{"outage": null}`` ends it).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator


@dataclass(frozen=True, slots=True)
class Outage:
    start_s: float
    end_s: float | None  # None: until changed

    @classmethod
    def parse(cls, spec: str) -> Outage:
        start, sep, end = spec.partition(":")
        problem = f"outage must be START:END in seconds with 0 <= START <= END (END may be empty), not {spec!r}"
        try:
            window = cls(float(start or 0), float(end) if end else None)
        except ValueError:
            raise ValueError(problem) from None
        if not sep or window.start_s < 0 or (window.end_s is not None and window.end_s < window.start_s):
            raise ValueError(problem)
        return window

    def covers(self, elapsed_s: float) -> bool:
        return elapsed_s >= self.start_s and (self.end_s is None or elapsed_s < self.end_s)

    def __str__(self) -> str:
        return f"{self.start_s:g}:{'' if self.end_s is None else f'{self.end_s:g}'}"


class FailureSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    # The descriptions are `reverify judge-serve`'s help (``cli.flags``).
    fail_status: int = Field(default=503, ge=400, le=599, description="HTTP status of an injected failure (503)")
    fail_share: float = Field(default=0.0, ge=0.0, le=1.0, description="share of requests that fail, 0..1 (0)")
    seed: int = Field(default=0, description="which requests the failing share hits (0)")
    flip_share: float = Field(
        default=0.0, ge=0.0, le=1.0, description="chance that a verdict is flipped, drawn per request, 0..1 (0)"
    )
    latency_ms: float = Field(default=0.0, ge=0.0, description="wait before every answer (0)")
    rate_limit_rps: float | None = Field(
        default=None,
        gt=0.0,
        description="answer N requests a second, 429 + Retry-After for the rest",
        json_schema_extra={"metavar": "N"},
    )
    outage: Outage | None = Field(
        default=None,
        description="fail every request from START to END s after start",
        json_schema_extra={"metavar": "START:END"},
    )

    @field_validator("outage", mode="before")
    @classmethod
    def _parse_outage(cls, value: Any) -> Any:
        return Outage.parse(value) if isinstance(value, str) else value

    def public(self) -> dict[str, Any]:
        return {
            "fail_status": self.fail_status,
            "fail_share": self.fail_share,
            "flip_share": self.flip_share,
            "seed": self.seed,
            "latency_ms": self.latency_ms,
            "rate_limit_rps": self.rate_limit_rps,
            "outage": None if self.outage is None else str(self.outage),
        }


class RequestBucket:
    """A token bucket of ``rate`` requests a second holding at most one second's worth."""

    def __init__(self, rate: float, now: float) -> None:
        self.rate = rate
        self.tokens = max(1.0, rate)
        self.at = now

    def take(self, now: float) -> float:
        """0 when the request may be answered (it takes a token), else the seconds until one is there."""
        self.tokens = min(max(1.0, self.rate), self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return 0.0
        return (1.0 - self.tokens) / self.rate


def share_hit(seed: int, content: bytes, share: float) -> bool:
    """Whether a request falls in the failing share: a stable hash of (seed, content) mapped onto [0, 1)."""
    if share <= 0.0:
        return False
    if share >= 1.0:
        return True
    digest = hashlib.sha256(seed.to_bytes(8, "big", signed=True) + content).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < share
