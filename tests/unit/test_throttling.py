"""Throttling, both sides: what a throttled reply asks for, the local judge's bucket, and the adapted limit."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
from aiohttp import web

from reverify_assets.local_judge.settings import RequestBucket
from reverify_assets.rows import verifier_wire
from reverify_assets.rows.adaptive_limit import LEAST_PAUSE_S, AdaptiveLimit
from reverify_assets.rows.verifier_wire import asked_wait_s, retry_after_s
from reverify_assets.verifier.client import VerifyOutcome
from tests.support.app_client import client_for


@pytest.mark.parametrize(
    ("headers", "wait"),
    [
        ({"retry-after": "3"}, 3.0),
        ({"retry-after": "0.5"}, 0.5),
        ({"retry-after-ms": "120", "retry-after": "9"}, 0.12),
        ({"retry-after-ms": "soon", "retry-after": "2"}, 2.0),
        ({"retry-after": "-1"}, None),
        ({"retry-after": "nan"}, None),
        ({"retry-after": "whenever"}, None),
        ({}, None),
    ],
)
def test_what_a_throttled_reply_asks_for(headers: dict[str, str], wait: float | None) -> None:
    assert retry_after_s(headers) == wait


@pytest.mark.parametrize(("status", "wait"), [(429, 3.0), (503, 3.0), (500, None), (408, None), (200, None)])
def test_only_a_throttling_status_asks_for_a_wait(status: int, wait: float | None) -> None:
    assert asked_wait_s(status, {"retry-after": "3"}) == wait


def test_a_retry_after_date_is_the_time_until_it() -> None:
    later = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    assert 25 <= (retry_after_s({"retry-after": later}) or 0) <= 30
    earlier = format_datetime(datetime.now(UTC) - timedelta(seconds=30), usegmt=True)
    assert retry_after_s({"retry-after": earlier}) == 0.0


def test_the_bucket_answers_its_rate_and_says_when_the_next_token_comes() -> None:
    bucket = RequestBucket(rate=4.0, now=0.0)
    assert [bucket.take(0.0) for _ in range(4)] == [0.0] * 4, "a second's worth at once"
    assert bucket.take(0.0) == pytest.approx(0.25)
    assert bucket.take(0.25) == 0.0 and bucket.take(0.25) == pytest.approx(0.25)
    assert [bucket.take(10.0) for _ in range(5)][-1] > 0, "idle time fills it to one second's worth, not more"


def test_a_burst_of_throttled_replies_halves_the_limit_once_and_successes_grow_it_back() -> None:
    async def scenario() -> list[float]:
        limit = AdaptiveLimit(16)
        seen = []
        async with limit.slot() as first, limit.slot() as second:
            limit.throttled(first)
            limit.throttled(second)  # sent before the cut: the same burst
        seen.append(limit.limit)
        async with limit.slot() as after_the_cut:
            limit.throttled(after_the_cut)
        seen.append(limit.limit)
        for _ in range(4 * 8):
            async with limit.slot():
                pass
            limit.succeeded()
        seen.append(limit.limit)
        for _ in range(10_000):
            limit.succeeded()
        seen.append(limit.limit)
        return seen

    halved, quartered, regrown, capped = asyncio.run(scenario())
    assert (halved, quartered) == (8.0, 4.0)
    assert 8.0 <= regrown < 16.0 and capped == 16.0


def test_no_more_than_the_limit_are_in_flight() -> None:
    async def scenario() -> int:
        limit = AdaptiveLimit(3)
        peak = 0

        async def call() -> None:
            nonlocal peak
            async with limit.slot():
                peak = max(peak, limit.in_flight)
                await asyncio.sleep(0.001)

        await asyncio.gather(*(call() for _ in range(50)))
        return peak

    assert asyncio.run(scenario()) == 3


class ThrottlingServer:
    """A resources server that throttles its first ``refusals`` requests, then scores; records when each came."""

    def __init__(self, refusals: int, status: int = 429, **headers: str) -> None:
        self.refusals, self.status, self.headers = refusals, status, headers
        self.arrivals: list[float] = []
        self.arrivals_of: dict[int, list[float]] = {}

    async def verify(self, request: web.Request) -> web.Response:
        self.arrivals.append(time.monotonic())
        if isinstance(number := (await request.json()).get("id"), int):
            self.arrivals_of.setdefault(number, []).append(self.arrivals[-1])
        if len(self.arrivals) <= self.refusals:
            return web.Response(status=self.status, text="slow down", headers=self.headers)
        return web.json_response({"reward": 1.0})

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/verify", self.verify)
        return app


@pytest.mark.parametrize(
    ("server", "scored"),
    [
        pytest.param(ThrottlingServer(5, **{"Retry-After": "0"}), True, id="five 429s saying wait: not attempts"),
        pytest.param(ThrottlingServer(5, 503, **{"retry-after-ms": "1"}), True, id="a 503 saying wait, too"),
        pytest.param(ThrottlingServer(5), False, id="429s that do not say: three attempts"),
        pytest.param(ThrottlingServer(5, **{"Retry-After": "3600"}), False, id="asking for an hour: attempts"),
    ],
)
def test_a_resources_server_that_says_how_long_to_wait_is_waited_out(server: ThrottlingServer, scored: bool) -> None:
    async def scenario() -> VerifyOutcome:
        async with client_for(server.app()) as client:
            return await client.verify(b"{}")

    outcome = asyncio.run(scenario())
    assert (outcome.result == {"reward": 1.0}) is scored, outcome
    assert len(server.arrivals) == (6 if scored else 3)


def test_a_server_asking_to_wait_0_s_for_ever_gets_a_bounded_number_of_free_retries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(verifier_wire, "MAX_THROTTLED_WAIT_S", 5.0)  # each wait counts 1 s: five are free
    server = ThrottlingServer(10_000, **{"Retry-After": "0"})

    async def scenario() -> VerifyOutcome:
        async with client_for(server.app()) as client:
            return await client.verify(b"{}")

    assert asyncio.run(scenario()).result is None
    assert len(server.arrivals) == 5 + 3
    gaps = [later - earlier for earlier, later in zip(server.arrivals, server.arrivals[1:6], strict=False)]
    assert min(gaps) >= LEAST_PAUSE_S * 0.9, "each free retry waited a little"


def test_a_burst_of_throttled_requests_cuts_the_limit_once_and_each_waits_its_retry_after() -> None:
    server = ThrottlingServer(20, **{"retry-after-ms": "200"})

    async def scenario() -> tuple[list[VerifyOutcome], AdaptiveLimit | None]:
        async with client_for(server.app()) as client:
            outcomes = await asyncio.gather(*(client.verify(b'{"id": %d}' % number) for number in range(20)))
            return list(outcomes), client.throttle

    outcomes, throttle = asyncio.run(scenario())
    assert all(outcome.result == {"reward": 1.0} for outcome in outcomes)
    assert throttle is not None and throttle.cuts == 1, "one burst, one cut"
    assert throttle.ceiling == 20, "the ceiling is the requests that were in flight, not what was left of them"
    for number in range(20):
        refused, answered = server.arrivals_of[number]
        assert answered - refused >= 0.19, f"request {number} came back before its 200 ms"
