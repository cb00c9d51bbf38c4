"""Throttling, both sides: what a throttled reply asks for, the local judge's bucket, and the adapted limit."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from reverify_assets.judge_model.settings import RequestBucket
from reverify_assets.lib.adaptive_limit import AdaptiveLimit
from reverify_assets.lib.verifier_wire import retry_after_s


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
            await limit.succeeded()
        seen.append(limit.limit)
        for _ in range(10_000):
            await limit.succeeded()
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
