"""What the ``equivalence_judge`` server tries again and how long it waits: failed judge calls, backoff,
throttling (``Retry-After``) and the judge URL. Waits are recorded, never slept."""

from __future__ import annotations

import socket

import pytest
from aiohttp import web

from reverify_assets.servers.judge.judge_client import chat_completions_url
from tests.support.scripted_judge import (
    KEY_ENV,
    Reply,
    completion,
    hang,
    raw,
    status,
    verify,
    verify_body,
)


@pytest.fixture(autouse=True)
def no_key_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)


# --- retries: what is tried again, and how long we wait ------------------------------------------------------


@pytest.mark.parametrize(
    ("replies", "calls", "reason_start"),
    [
        ([status(503)], 3, "HTTP 503 from the judge"),
        ([status(500)], 3, "HTTP 500"),
        ([status(429)], 3, "HTTP 429"),
        ([status(408)], 3, "HTTP 408"),
        ([status(401)], 1, "HTTP 401 from the judge"),  # status checked before the body is parsed
        ([status(403)], 1, "HTTP 403"),
        ([status(400)], 1, "HTTP 400"),
        ([status(404, "not json at all")], 1, "HTTP 404 from the judge: not json at all"),
        ([raw("<html>oops</html>")], 1, "the judge's HTTP 200 reply is not JSON"),
        ([raw('{"error": "quota"}')], 1, "the judge's HTTP 200 reply is not a chat completion"),
        ([raw('{"choices": [{"text": "legacy"}]}')], 1, "the judge's HTTP 200 reply has no `choices[0].message`"),
        ([hang(5)], 3, "TimeoutError: no judge reply within 0.05 s"),
    ],
)
def test_failed_calls_become_judge_failed_rows(replies: list[Reply], calls: int, reason_start: str) -> None:
    outcome = verify(replies, timeout_s=0.05)
    row = outcome.result
    assert len(outcome.judge.requests) == calls
    assert row["_ng_failure_class"] == "judge_failed" and row["failure_kind"] == "judge_failed"
    assert row["_ng_failure_judge_error"].startswith(reason_start), row["_ng_failure_judge_error"]
    assert row["_ng_failure_judge_error"].endswith(" (after 3 attempts)") is (calls == 3)
    assert row["response"] == verify_body()["response"] and row["mask_sample"] is True
    assert len(outcome.waits) == calls - 1


def test_a_refused_connection_is_retried_and_named_by_its_exception_class() -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    outcome = verify([completion("[[A=B]]")], judge_base_url=f"http://127.0.0.1:{port}")
    assert outcome.result["_ng_failure_judge_error"].startswith("ClientConnectorError: ")
    assert outcome.result["_ng_failure_judge_error"].endswith("(after 3 attempts)")
    assert len(outcome.waits) == 2


def test_a_retry_that_succeeds_scores_the_row() -> None:
    outcome = verify([status(503), status(429), completion("[[A=B]]")])
    assert outcome.result["reward"] == 1.0 and len(outcome.judge.requests) == 3


def test_backoff_is_full_jitter_between_zero_and_the_capped_exponential() -> None:
    outcome = verify([status(503)], max_attempts=6, retry_base_wait_s=2.0, retry_max_wait_s=5.0)
    caps = [2.0, 4.0, 5.0, 5.0, 5.0]
    assert len(outcome.waits) == 5
    assert all(0.0 <= wait <= cap for wait, cap in zip(outcome.waits, caps, strict=True))
    assert len(set(outcome.waits)) == 5, "jittered, not constant"


def throttled(code: int, **headers: str) -> Reply:
    async def reply(_: web.Request) -> web.Response:
        return web.Response(status=code, text='{"error": {"message": "slow down"}}', headers=headers)

    return reply


@pytest.mark.parametrize(
    ("reply", "waits"),
    [
        (throttled(429, **{"Retry-After": "2"}), [2.0] * 5),
        (throttled(429, **{"retry-after-ms": "250", "Retry-After": "1"}), [0.25] * 5),
        (throttled(503, **{"Retry-After": "1.5"}), [1.5] * 5),
    ],
)
def test_a_judge_that_says_how_long_to_wait_is_waited_out_without_spending_attempts(
    reply: Reply, waits: list[float]
) -> None:
    outcome = verify([reply] * 5 + [completion("[[A=B]]")])
    assert outcome.result["reward"] == 1.0, "five throttled replies, three attempts: none of them spent"
    assert outcome.waits == pytest.approx(waits, abs=0.05) and len(outcome.judge.requests) == 6


def test_a_judge_asking_for_longer_than_the_throttle_budget_fails_the_row() -> None:
    outcome = verify([throttled(429, **{"Retry-After": "3600"})])
    assert outcome.result["_ng_failure_class"] == "judge_failed"
    assert outcome.result["_ng_failure_judge_error"].startswith("HTTP 429 from the judge")
    assert len(outcome.judge.requests) == 3 and max(outcome.waits) < 3600


def test_one_attempt_means_no_retry_and_no_suffix() -> None:
    outcome = verify([status(503)], max_attempts=1)
    assert outcome.result["_ng_failure_judge_error"].startswith("HTTP 503") and outcome.waits == []
    assert "attempts" not in outcome.result["_ng_failure_judge_error"]


@pytest.mark.parametrize(
    ("base", "url"),
    [
        ("http://h:1", "http://h:1/v1/chat/completions"),
        ("http://h:1/", "http://h:1/v1/chat/completions"),
        ("http://h:1/v1", "http://h:1/v1/chat/completions"),
        ("https://api.example.com/v1/", "https://api.example.com/v1/chat/completions"),
        ("https://gw.example.com/openai", "https://gw.example.com/openai/v1/chat/completions"),
    ],
)
def test_chat_completions_url(base: str, url: str) -> None:
    assert chat_completions_url(base) == url
