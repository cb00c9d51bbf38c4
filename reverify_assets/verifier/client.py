"""The HTTP client of a NeMo-Gym-compatible resources server: one pooled aiohttp session, retries."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import IO, Any, cast

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

    async def batch_limit(self) -> int:
        """Rows per ``/verify_batch`` request the server takes; 1 when it has no such route (NeMo Gym's
        servers), which means one ``/verify`` per row."""
        try:
            async with self.session.get(f"{self.base_url}/verify_batch", timeout=self._timeout) as reply:
                if reply.status != 200:
                    return 1
                limits = orjson.loads(await reply.read())
        except (aiohttp.ClientError, TimeoutError, orjson.JSONDecodeError):
            return 1
        max_rows = limits.get("max_rows") if isinstance(limits, dict) else None
        return max_rows if isinstance(max_rows, int) and max_rows > 1 else 1

    async def verify_batch(self, bodies: list[bytes]) -> list[VerifyOutcome]:
        """Each body's outcome, in order, by ``/verify_batch``; rows the server could not grade for a
        retryable reason are sent again (alone with their kind), as ``verify`` retries one row."""
        outcomes: list[VerifyOutcome | None] = [None] * len(bodies)
        waiting = list(range(len(bodies)))
        last_errors: dict[int, str] = {}
        for attempt in range(self.retry.attempts):
            if attempt:
                await asyncio.sleep(self.retry.delay(attempt - 1))
            request = b'{"requests":[' + b",".join(bodies[index] for index in waiting) + b"]}"
            try:
                async with self.session.post(
                    f"{self.base_url}/verify_batch", data=request, headers=JSON_HEADERS, timeout=self._timeout
                ) as reply:
                    payload = await reply.read()
                    status = reply.status
            except (aiohttp.ClientError, TimeoutError) as exc:
                error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
                last_errors.update(dict.fromkeys(waiting, error))
                continue
            if status != 200:
                error = f"HTTP {status}: {_short(payload)}"
                if not is_retryable_status(status):
                    for index in waiting:
                        outcomes[index] = VerifyOutcome(None, error)
                    return _finished(outcomes)
                last_errors.update(dict.fromkeys(waiting, error))
                continue
            waiting = self._settle_batch(payload, waiting, outcomes, last_errors)
            if not waiting:
                return _finished(outcomes)
        for index in waiting:
            outcomes[index] = VerifyOutcome(None, f"{last_errors[index]} (after {self.retry.attempts} attempts)")
        return _finished(outcomes)

    def _settle_batch(
        self, payload: bytes, sent: list[int], outcomes: list[VerifyOutcome | None], last_errors: dict[int, str]
    ) -> list[int]:
        """Fill the outcomes the batch reply settles; the rows to send again."""
        try:
            results = orjson.loads(payload).get("results")
        except (orjson.JSONDecodeError, AttributeError):
            results = None
        if not isinstance(results, list) or len(results) != len(sent):
            error = f"the verify_batch reply does not hold {len(sent)} results: {_short(payload)}"
            for index in sent:
                outcomes[index] = VerifyOutcome(None, error)
            return []
        again = []
        for index, result in zip(sent, results, strict=True):
            status = result.get("status") if isinstance(result, dict) else None
            if status == 200:
                outcomes[index] = _verify_outcome(result.get("response"), payload)
                continue
            detail = result.get("detail") if isinstance(result, dict) else result
            error = f"HTTP {status}: {_short(orjson.dumps(detail))}"
            if isinstance(status, int) and is_retryable_status(status):
                last_errors[index] = error
                again.append(index)
            else:
                outcomes[index] = VerifyOutcome(None, error)
        return again

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
    return _verify_outcome(result, payload)


def _verify_outcome(result: Any, payload: bytes) -> VerifyOutcome:
    if not isinstance(result, dict) or "reward" not in result:
        shown = payload if not isinstance(result, dict) else orjson.dumps(result)
        return VerifyOutcome(None, f"the verify reply has no `reward`: {_short(shown)}")
    return VerifyOutcome(result)


def _finished(outcomes: list[VerifyOutcome | None]) -> list[VerifyOutcome]:
    return cast(list[VerifyOutcome], outcomes)  # every path that returns has settled each row


def _short(payload: bytes, limit: int = 500) -> str:
    text = payload.decode(errors="replace").strip()
    return text if len(text) <= limit else text[:limit] + "…"
