"""The HTTP client of a NeMo-Gym-compatible resources server: one pooled aiohttp session, retries."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import IO, Any

import aiohttp
import orjson

from reverify_assets.verifier.retry import RetryPolicy, is_retryable_status

JSON_HEADERS = {"Content-Type": "application/json"}


@dataclass(frozen=True, slots=True)
class VerifyOutcome:
    result: dict[str, Any] | None  # the server's JSON object, when it gave one
    error: str | None = None  # why not, after every retry


class VerifierClient:
    def __init__(self, name: str, base_url: str, session: aiohttp.ClientSession, retry: RetryPolicy) -> None:
        self.name = name
        self.base_url = base_url.rstrip("/")
        self.session = session
        self.retry = retry
        self._timeout = aiohttp.ClientTimeout(total=retry.timeout_s)

    async def reverify_mode(self) -> str:
        try:
            async with self.session.get(f"{self.base_url}/reverify_mode", timeout=self._timeout) as reply:
                if reply.status == 404:
                    return "unknown"  # an older server without the route declares nothing
                reply.raise_for_status()
                mode = orjson.loads(await reply.read())
        except (aiohttp.ClientError, TimeoutError, orjson.JSONDecodeError) as exc:
            raise ConnectionError(f"GET {self.base_url}/reverify_mode failed: {exc}") from exc
        return str(mode).lower()

    async def verify(self, body: bytes) -> VerifyOutcome:
        last_error = "no attempt made"
        for attempt in range(self.retry.attempts):
            if attempt:
                await asyncio.sleep(self.retry.delay(attempt - 1))
            try:
                async with self.session.post(
                    f"{self.base_url}/verify", data=body, headers=JSON_HEADERS, timeout=self._timeout
                ) as reply:
                    payload = await reply.read()
                    if reply.status == 200:
                        return _parse_verify_reply(payload)
                    last_error = f"HTTP {reply.status}: {_short(payload)}"
                    if not is_retryable_status(reply.status):
                        return VerifyOutcome(None, last_error)  # the request itself is wrong: retrying won't help
            except (aiohttp.ClientError, TimeoutError) as exc:
                last_error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        return VerifyOutcome(None, f"{last_error} (after {self.retry.attempts} attempts)")

    async def aggregate_metrics(self, body: IO[bytes]) -> dict[str, Any] | None:
        """POST a prepared ``{"verify_responses": [...]}`` body; None when the server has no such route."""
        async with self.session.post(
            f"{self.base_url}/aggregate_metrics", data=body, headers=JSON_HEADERS, timeout=None
        ) as reply:
            if reply.status in (404, 405):
                return None
            payload = await reply.read()
            if reply.status != 200:
                raise ConnectionError(
                    f"POST {self.base_url}/aggregate_metrics answered HTTP {reply.status}: {_short(payload)}"
                )
        metrics = orjson.loads(payload)
        if not isinstance(metrics, dict):
            raise ConnectionError(f"POST {self.base_url}/aggregate_metrics did not answer a JSON object")
        return metrics


def _parse_verify_reply(payload: bytes) -> VerifyOutcome:
    try:
        result = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return VerifyOutcome(None, f"the verify reply is not JSON: {_short(payload)}")
    if not isinstance(result, dict) or "reward" not in result:
        return VerifyOutcome(None, f"the verify reply has no `reward`: {_short(payload)}")
    return VerifyOutcome(result)


def _short(payload: bytes, limit: int = 500) -> str:
    text = payload.decode(errors="replace").strip()
    return text if len(text) <= limit else text[:limit] + "…"
