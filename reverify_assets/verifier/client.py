"""The HTTP client of a NeMo-Gym-compatible resources server: one pooled aiohttp session, retries."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeVar, cast

import aiohttp
import orjson

from reverify_assets.errors import ServerError
from reverify_assets.processes import secrets as process_secrets
from reverify_assets.rows.adaptive_limit import AdaptiveLimit, Slot
from reverify_assets.rows.result_routing import Destination
from reverify_assets.rows.routed_row import JUDGE_SPEND_FIELDS, RoutedRow
from reverify_assets.rows.row_fields import reward_number
from reverify_assets.rows.verifier_wire import (
    STALE_PAIR,
    RetryPolicy,
    ThrottleWaits,
    asked_wait_s,
    is_retryable_status,
    is_throttled,
)

JSON_HEADERS = {"Content-Type": "application/json"}
NDJSON_HEADERS = {"Content-Type": "application/x-ndjson"}
# A batch route answered with these was not there to take the batch: not found, not allowed, too large, not JSON.
ROUTE_REFUSED = frozenset({404, 405, 413, 415})
Outcome = TypeVar("Outcome")


class Route(StrEnum):
    """How a server's rows are sent, the fastest it offers first."""

    STORED_ROWS = "/reverify_batch"  # a built-in server: the two stored lines in, the line to store out
    VERIFY_BATCH = "/verify_batch"  # one of NeMo Gym's, through the route ``gym.server_bootstrap`` adds
    VERIFY = "/verify"  # one request a row: a server at a `url:`, or one that cannot take a batch


# Not frozen: one is made for every row, and a frozen dataclass's __init__ costs about three times as much.
@dataclass(slots=True)
class VerifyOutcome:
    result: dict[str, Any] | None  # the server's JSON object, when it gave one
    error: str | None = None  # why not, after every retry


@dataclass(slots=True)
class StoredRowOutcome:
    """A stored row re-scored by ``/reverify_batch``: as the server routed it, or why not."""

    routed: RoutedRow | None = None  # the line to store, where, and its reward
    stored_reward: float | None = None  # what the rollout row stored
    stored_masked: bool = False
    error: str | None = None  # after every retry
    stale: bool = False  # the two stored rows did not make a verify request for their key (HTTP 409)


class AggregateMetricsFailed(ServerError):
    """A server's ``/aggregate_metrics`` gave no metrics, after every attempt worth making."""

    def __init__(self, server: str, url: str, reason: str) -> None:
        super().__init__(f"resources server {server!r} gave no aggregate metrics: POST {url}: {reason}", server=server)


class VerifierClient:
    def __init__(self, name: str, base_url: str, session: aiohttp.ClientSession, retry: RetryPolicy) -> None:
        self.name = name
        self.base_url = base_url.rstrip("/")
        self.session = session
        self.retry = retry
        self._timeout = aiohttp.ClientTimeout(total=retry.timeout_s)
        # Made at the first throttled reply, from the requests then in flight: until a server throttles, its
        # requests pay nothing for a limit they do not need.
        self.throttle: AdaptiveLimit | None = None
        self._in_flight = 0
        self._peak_in_flight = 0
        # An aggregate request has no limit once connected: a server may take long over a big group's rows.
        self._aggregate_timeout = aiohttp.ClientTimeout(total=None, sock_connect=retry.timeout_s)

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

    async def route(self) -> tuple[Route, int]:
        """The server's fastest route, and the rows a request of it takes: ``/reverify_batch`` (built-in
        servers), else ``/verify_batch`` (NeMo Gym's, started by us), else one ``/verify`` a row."""
        for batch in (Route.STORED_ROWS, Route.VERIFY_BATCH):
            if (rows := await self._batch_limit(batch)) > 1:
                return batch, rows
        return Route.VERIFY, 1

    async def _batch_limit(self, route: Route) -> int:
        """Rows per request of ``route`` the server takes (``GET`` answers ``{"max_rows": N}``); 0 without it."""
        try:
            async with self.session.get(f"{self.base_url}{route}", timeout=self._timeout) as reply:
                if reply.status != 200:
                    return 0
                limits = orjson.loads(await reply.read())
        except (aiohttp.ClientError, TimeoutError, orjson.JSONDecodeError):
            return 0
        max_rows = limits.get("max_rows") if isinstance(limits, dict) else None
        return max_rows if isinstance(max_rows, int) and max_rows > 1 else 0

    async def verify_batch(self, bodies: list[bytes]) -> list[VerifyOutcome]:
        """Each ``/verify`` body's outcome, in order, by ``/verify_batch`` (see ``gym.server_bootstrap``): a
        row's reply, its retries and its error are those one ``/verify`` a row would have had."""

        def request(waiting: list[int]) -> bytes:
            return b"\n".join(bodies[index] for index in waiting)

        async def one_a_row(waiting: list[int]) -> list[VerifyOutcome]:
            return list(await asyncio.gather(*(self.verify(bodies[index]) for index in waiting)))

        return await self._batch(
            Route.VERIFY_BATCH,
            len(bodies),
            request,
            _settle_verify_batch,
            _failed_verify,
            NDJSON_HEADERS,
            refused=one_a_row,
        )

    async def reverify_batch(self, rows: list[bytes], stamp: bytes) -> list[StoredRowOutcome]:
        """Each stored row's outcome, in order, by ``/reverify_batch`` (see ``servers.stored_rows``): each of
        ``rows`` is ``[task, rollout, <input line>, <rollout line>]``, and ``stamp`` the provenance as JSON."""

        def request(waiting: list[int]) -> bytes:
            return b'{"stamp":' + stamp + b',"rows":[' + b",".join(rows[index] for index in waiting) + b"]}"

        return await self._batch(Route.STORED_ROWS, len(rows), request, _settle_reverify_batch, _failed_stored)

    async def _batch(
        self,
        route: str,
        rows: int,
        request: Callable[[list[int]], bytes],
        settle: Callable[[bytes, list[int], list[Outcome | None], dict[int, str]], list[int]],
        failed: Callable[[str], Outcome],
        headers: dict[str, str] = JSON_HEADERS,
        refused: Callable[[list[int]], Awaitable[list[Outcome]]] | None = None,
    ) -> list[Outcome]:
        """POST the rows still waiting until each has settled or the attempts run out. ``settle`` fills the
        outcomes a 200 reply gives and returns the rows to send again, noting why in its last argument.
        ``refused``: what settles the rows when the route itself is refused (gone after a restart without it, or a
        proxy that does not know it or takes no body that big), instead of failing them all."""
        outcomes: list[Outcome | None] = [None] * rows
        waiting = list(range(rows))
        last_errors: dict[int, str] = {}
        waits = ThrottleWaits()
        attempt = 0
        while attempt < self.retry.attempts:
            if attempt:
                await asyncio.sleep(self.retry.delay(attempt - 1))
            attempt += 1
            try:
                status, payload = await self._post(f"{self.base_url}{route}", request(waiting), waits, headers)
            except (aiohttp.ClientError, TimeoutError) as exc:
                error = _describe(exc)
                last_errors.update(dict.fromkeys(waiting, error))
                continue
            if waits.granted:
                attempt -= 1  # the server asked us to wait: that was not an attempt
                continue
            if status != 200:
                error = f"HTTP {status}: {_short(payload)}"
                if refused is not None and status in ROUTE_REFUSED:
                    for index, outcome in zip(waiting, await refused(waiting), strict=True):
                        outcomes[index] = outcome
                    return _finished(outcomes)
                if not is_retryable_status(status):
                    for index in waiting:
                        outcomes[index] = failed(error)
                    return _finished(outcomes)
                last_errors.update(dict.fromkeys(waiting, error))
                continue
            waiting = settle(payload, waiting, outcomes, last_errors)
            if not waiting:
                return _finished(outcomes)
        for index in waiting:
            outcomes[index] = failed(f"{last_errors[index]} (after {self.retry.attempts} attempts)")
        return _finished(outcomes)

    async def verify(self, body: bytes) -> VerifyOutcome:
        last_error = "no attempt made"
        waits = ThrottleWaits()
        attempt = 0
        while attempt < self.retry.attempts:
            if attempt:
                await asyncio.sleep(self.retry.delay(attempt - 1))
            attempt += 1
            try:
                status, payload = await self._post(f"{self.base_url}/verify", body, waits)
            except (aiohttp.ClientError, TimeoutError) as exc:
                last_error = _describe(exc)
                continue
            if waits.granted:
                attempt -= 1  # the server asked us to wait: that was not an attempt
                continue
            if status == 200:
                return _parse_verify_reply(payload)
            last_error = f"HTTP {status}: {_short(payload)}"
            if not is_retryable_status(status):
                return VerifyOutcome(None, last_error)  # the request itself is wrong: retrying won't help
        return VerifyOutcome(None, f"{last_error} (after {self.retry.attempts} attempts)")

    async def _post(
        self, url: str, body: bytes, waits: ThrottleWaits, headers: dict[str, str] = JSON_HEADERS
    ) -> tuple[int, bytes]:
        """One POST. A throttled reply (429, or 503 with ``Retry-After``) cuts the requests in flight to this
        server; one saying how long to wait holds every request back that long, and sets ``waits.granted``
        while its call's budget lasts."""
        waits.granted = False
        throttle = self.throttle
        if throttle is None:
            self._in_flight += 1
            self._peak_in_flight = max(self._peak_in_flight, self._in_flight)
            try:
                status, payload, wait_s = await self._send(url, body, headers)
            finally:
                self._in_flight -= 1
            if is_throttled(status, wait_s):
                if self.throttle is None:  # the first throttled reply of a burst: the others were sent with it
                    self.throttle = AdaptiveLimit(max(2, self._peak_in_flight))
                    self.throttle.throttled(Slot(self.throttle.cuts))
                throttle = self.throttle
        else:
            async with throttle.slot() as slot:
                status, payload, wait_s = await self._send(url, body, headers)
            if is_throttled(status, wait_s):
                throttle.throttled(slot)
            elif status == 200:
                throttle.succeeded()
        if throttle is not None and is_throttled(status, wait_s) and wait_s is not None and waits.take(wait_s):
            throttle.pause(wait_s)
        return status, payload

    async def _send(self, url: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes, float | None]:
        async with self.session.post(url, data=body, headers=headers, timeout=self._timeout) as reply:
            payload = await reply.read()
            wait_s = asked_wait_s(reply.status, reply.headers)
            return reply.status, payload, wait_s

    async def aggregate_metrics(self, open_body: Callable[[], io.IOBase]) -> dict[str, Any] | None:
        """POST a prepared ``{"verify_responses": [...]}`` body, opened afresh for each attempt; None when the
        server has no such route. Retried as ``/verify`` is; AggregateMetricsFailed once no attempt is left."""
        url = f"{self.base_url}/aggregate_metrics"
        last_error = "no attempt made"
        for attempt in range(self.retry.attempts):
            if attempt:
                await asyncio.sleep(self.retry.delay(attempt - 1))
            try:
                with open_body() as body:
                    async with self.session.post(
                        url, data=body, headers=JSON_HEADERS, timeout=self._aggregate_timeout
                    ) as reply:
                        if reply.status in (404, 405):
                            return None
                        payload = await reply.read()
                        status = reply.status
            except (aiohttp.ClientError, TimeoutError) as exc:
                last_error = _describe(exc)
                continue
            if status == 200:
                if (metrics := _json_object(payload)) is None:
                    raise AggregateMetricsFailed(self.name, url, f"the reply is not a JSON object: {_short(payload)}")
                return metrics
            last_error = f"HTTP {status}: {_short(payload)}"
            if not is_retryable_status(status):
                raise AggregateMetricsFailed(self.name, url, last_error)
        raise AggregateMetricsFailed(self.name, url, f"{last_error} (after {self.retry.attempts} attempts)")


def _settle_reverify_batch(
    payload: bytes, sent: list[int], outcomes: list[StoredRowOutcome | None], last_errors: dict[int, str]
) -> list[int]:
    """The reply is NDJSON: ``{"results": [...]}``, then the line of each result that has one, in order."""
    head, _, rest = payload.partition(b"\n")
    try:
        results = orjson.loads(head).get("results")
    except (orjson.JSONDecodeError, AttributeError):
        results = None
    lines = iter(rest.split(b"\n"))
    settled: list[tuple[int, StoredRowOutcome]] = []
    again: list[int] = []
    try:
        if not isinstance(results, list) or len(results) != len(sent):
            raise ValueError(f"it does not hold {len(sent)} results")
        for index, result in zip(sent, results, strict=True):
            status = result.get("status") if isinstance(result, dict) else None
            if status == 200:
                settled.append((index, _stored_row_outcome(result, lines)))
            elif status == STALE_PAIR:
                settled.append((index, StoredRowOutcome(error=_error(status, result), stale=True)))
            elif (error := _retry_or_error(index, status, result, again, last_errors)) is not None:
                settled.append((index, StoredRowOutcome(error=error)))
        if next(lines, None) != b"" or next(lines, None) is not None:
            raise ValueError("its lines do not match its results")
    except (ValueError, TypeError, KeyError) as exc:
        error = f"the reverify_batch reply is malformed ({exc}): {_short(payload)}"
        for index in sent:
            outcomes[index] = StoredRowOutcome(error=error)
        return []
    for index, outcome in settled:
        outcomes[index] = outcome
    return again


# A line of /verify_batch's reply: the row's status, then its /verify reply as the server sent it, JSON as it is
# or, for a reply that is not JSON, its text as a JSON string.
_VERIFY_LINE_HEAD = b'{"status":'
_VERIFY_LINE_JSON, _VERIFY_LINE_TEXT = b',"body":', b',"text":'


def _verify_line(line: bytes) -> tuple[int, bytes]:
    """A row's status and the bytes ``/verify`` would have answered."""
    if line.startswith(_VERIFY_LINE_HEAD) and line.endswith(b"}"):
        for marker in (_VERIFY_LINE_JSON, _VERIFY_LINE_TEXT):
            head, found, rest = line[len(_VERIFY_LINE_HEAD) : -1].partition(marker)
            if found and head.isdigit():
                if marker is _VERIFY_LINE_JSON:
                    return int(head), rest
                text = orjson.loads(rest)
                if isinstance(text, str):
                    return int(head), text.encode()
    raise ValueError(f"a line is not a row's status and reply: {_short(line)}")


def _settle_verify_batch(
    payload: bytes, sent: list[int], outcomes: list[VerifyOutcome | None], last_errors: dict[int, str]
) -> list[int]:
    """The reply is NDJSON, a line a row in order (``_verify_line``): the bytes ``/verify`` would have answered are
    taken as they are (not parsed and dumped again), so a row's outcome and message are the same either way."""
    lines = payload.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    again: list[int] = []
    settled: list[tuple[int, VerifyOutcome]] = []
    try:
        if len(lines) != len(sent):
            raise ValueError(f"it has {len(lines)} lines for {len(sent)} rows")
        for index, line in zip(sent, lines, strict=True):
            status, body = _verify_line(line)
            if status == 200:
                settled.append((index, _parse_verify_reply(body)))
                continue
            error = f"HTTP {status}: {_short(body)}"
            if is_retryable_status(status):
                last_errors[index] = error
                again.append(index)
            else:
                settled.append((index, VerifyOutcome(None, error)))
    except (ValueError, orjson.JSONDecodeError) as exc:
        error = f"the verify_batch reply is malformed ({exc})"
        for index in sent:
            outcomes[index] = VerifyOutcome(None, error)
        return []
    for index, outcome in settled:
        outcomes[index] = outcome
    return again


def _failed_verify(error: str) -> VerifyOutcome:
    return VerifyOutcome(None, error)


def _stored_row_outcome(result: dict[str, Any], lines: Iterator[bytes]) -> StoredRowOutcome:
    destination = _DESTINATIONS[result["destination"]]
    line = b"" if destination is Destination.NOWHERE else _next_line(lines)
    failure_class = result.get("failure_class")
    routed = RoutedRow(
        destination,
        line,
        failure_class if isinstance(failure_class, str) else None,
        reward_number(result.get("reward")),
        result.get("masked") is True,
        *(_count(result.get(name)) for name in JUDGE_SPEND_FIELDS),
    )
    return StoredRowOutcome(routed, reward_number(result.get("stored_reward")), result.get("stored_masked") is True)


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


_DESTINATIONS = {destination.value: destination for destination in Destination}  # Enum lookup by value is slow


def _next_line(lines: Iterator[bytes]) -> bytes:
    line = next(lines, b"")
    if not line:  # a stored row is never empty
        raise ValueError("a result's line is missing")
    return line + b"\n"


def _retry_or_error(index: int, status: Any, result: Any, again: list[int], last_errors: dict[int, str]) -> str | None:
    """A row's error when it is final; None when the row goes in ``again``, to be sent once more."""
    error = _error(status, result)
    if isinstance(status, int) and is_retryable_status(status):
        last_errors[index] = error
        again.append(index)
        return None
    return error


def _error(status: Any, result: Any) -> str:
    detail = result.get("detail") if isinstance(result, dict) else result
    return f"HTTP {status}: {_short(orjson.dumps(detail))}"


def _failed_stored(error: str) -> StoredRowOutcome:
    return StoredRowOutcome(error=error)


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


def _finished(outcomes: list[Outcome | None]) -> list[Outcome]:
    return cast(list[Outcome], outcomes)  # every path that returns has settled each row


def _json_object(payload: bytes) -> dict[str, Any] | None:
    try:
        value = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _short(payload: bytes, limit: int = 500) -> str:
    """A server's reply as a message quotes it: its head, and no secret (it may echo a key it was given)."""
    text = payload.decode(errors="replace").strip()
    return process_secrets.redact(text if len(text) <= limit else text[:limit] + "…")
