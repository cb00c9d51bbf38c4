"""The ``equivalence_judge`` server against a scripted judge on loopback: verdicts, prompts, failsafe rows,
retries and key redaction. Backoff waits are recorded, never slept.

Rows marked "beyond the contract" pin NeMo Gym behaviour read from its ``equivalence_llm_judge`` source.
"""

from __future__ import annotations

import asyncio
import os
import random
import socket
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from reverify_assets.config.topology import ServerBlock
from reverify_assets.errors import ReverifyError
from reverify_assets.servers.app import build_app
from reverify_assets.servers.judge.config import EquivalenceJudgeConfig
from reverify_assets.servers.judge.failsafe import MAX_JUDGE_ERROR_CHARS, judge_failed_row
from reverify_assets.servers.judge.judge_client import chat_completions_url
from reverify_assets.servers.judge.metrics import ISSUE_RATE, compute_metrics
from reverify_assets.servers.judge.server import EquivalenceJudgeServer, parse_request
from reverify_assets.servers.judge.verdict import (
    CONFLICTING,
    NO_VERDICT,
    TRUNCATED,
    UNPARSEABLE,
)
from reverify_assets.servers.protocol import BadVerifyRequest, ReverifyMode
from reverify_assets.servers.registry import build_server, validate_builtin_block
from tests.support.judge_rows import message

T = TypeVar("T")
KEY = "sk-test-Zq9xV7distinctive-4242"
KEY_ENV = "REVERIFY_TEST_JUDGE_KEY"


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


# --- rollouts and requests -------------------------------------------------------------------------------


def verify_body(answer: str | None = "4", expected: str | None = "4", **extra: Any) -> dict[str, Any]:
    output = [message(answer)] if answer is not None else []
    body: dict[str, Any] = {
        "responses_create_params": {"input": [{"role": "user", "content": "What is 2+2?"}]},
        "response": {"id": "resp_1", "object": "response", "output": output},
        "_ng_task_index": 3,
        "_ng_rollout_index": 1,
    }
    if expected is not None:
        body["expected_answer"] = expected
    return body | extra


# --- a scripted judge --------------------------------------------------------------------------------------

Reply = Callable[[web.Request], Awaitable[web.StreamResponse]]


def completion(text: str | None, finish_reason: str = "stop") -> Reply:
    async def reply(_: web.Request) -> web.Response:
        choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish_reason}
        return web.json_response({"id": "c", "object": "chat.completion", "choices": [choice], "model": "m"})

    return reply


def status(code: int, body: str = '{"error": {"message": "nope"}}') -> Reply:
    async def reply(_: web.Request) -> web.Response:
        return web.Response(status=code, text=body, content_type="application/json")

    return reply


def raw(body: str) -> Reply:
    async def reply(_: web.Request) -> web.Response:
        return web.Response(status=200, text=body, content_type="application/json")

    return reply


def hang(seconds: float) -> Reply:
    async def reply(_: web.Request) -> web.Response:
        await asyncio.sleep(seconds)
        return web.json_response({})

    return reply


def echo_key(code: int) -> Reply:
    """A provider that quotes the caller's key back, as some error pages do."""

    async def reply(request: web.Request) -> web.Response:
        quoted = f"Incorrect API key provided: {request.headers.get('Authorization', '')}"
        if code == 200:
            return await completion(f"{quoted} [[A=B]]")(request)
        return web.json_response({"error": {"message": quoted}}, status=code)

    return reply


@dataclass
class ScriptedJudge:
    """Answers each request with the next scripted reply (the last one repeats); records what it was sent."""

    replies: list[Reply]
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[Mapping[str, str]] = field(default_factory=list)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.requests.append(await request.json())
        self.headers.append(dict(request.headers))
        index = min(len(self.requests), len(self.replies)) - 1
        return await self.replies[index](request)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.handle)
        return app

    def prompts(self) -> list[str]:
        return [request["messages"][-1]["content"] for request in self.requests]


@dataclass
class Outcome:
    result: dict[str, Any]
    judge: ScriptedJudge
    waits: list[float]


def judge_config(base_url: str, **fields: Any) -> EquivalenceJudgeConfig:
    return EquivalenceJudgeConfig.model_validate({"judge_base_url": base_url, "api_key_env": KEY_ENV, **fields})


async def _verify(replies: list[Reply], body: dict[str, Any], fields: dict[str, Any]) -> Outcome:
    judge = ScriptedJudge(replies)
    waits: list[float] = []

    async def record_wait(seconds: float) -> None:
        waits.append(seconds)

    async with TestServer(judge.app()) as test_server:
        base_url = fields.pop("judge_base_url", str(test_server.make_url("")))
        server = EquivalenceJudgeServer(judge_config(base_url, **fields), sleep=record_wait, rng=random.Random(7))
        await server.open()
        try:
            result = await server.verify(body)
        finally:
            await server.close()
    return Outcome(result, judge, waits)


def verify(replies: list[Reply], body: dict[str, Any] | None = None, **fields: Any) -> Outcome:
    return run(_verify(replies, body or verify_body(), fields))


@pytest.fixture(autouse=True)
def no_key_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)


# --- request validation ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ({k: v for k, v in verify_body().items() if k != "response"}, "`response` must be an object"),
        (verify_body(response="text"), "`response` must be an object"),
        (verify_body(expected=None), "`expected_answer` is required"),
        (verify_body(expected=None, expected_answer=4), "`expected_answer` must be a string"),
        (verify_body(options={"A": "x"}), "`options` must be a list"),
        (verify_body(metadata=[]), "`metadata` must be an object"),
        (verify_body(question=3), "`question` must be a string"),
        (verify_body(responses_create_params="x"), "`responses_create_params` must be an object"),
    ],
)
def test_bad_requests_are_422(body: dict[str, Any], error: str) -> None:
    with pytest.raises(BadVerifyRequest, match=error):
        parse_request(body)


def test_expected_answer_falls_back_to_metadata() -> None:  # beyond the contract (NeMo Gym's fallback)
    assert parse_request(verify_body(expected=None, metadata={"expected_answer": 12})).expected_answer == "12"
    assert parse_request(verify_body(expected="", metadata={"expected_answer": "x"})).expected_answer == "x"


# --- grading ----------------------------------------------------------------------------------------------


def test_equal_verdict_scores_one_with_the_full_response_shape() -> None:
    outcome = verify([completion("Both are four. [[A=B]]")], verify_body("It is 4.", "4", uuid="u1", options=[]))
    result = outcome.result
    assert list(result) == [
        "responses_create_params",
        "response",
        "reward",
        "mask_sample",
        "failure_kind",
        "failure_reason",
        "expected_answer",
        "extracted_answer",
        "judge_evaluations",
    ]
    assert (result["reward"], result["mask_sample"], result["failure_kind"], result["failure_reason"]) == (
        1.0,
        False,
        None,
        None,
    )
    assert (result["expected_answer"], result["extracted_answer"]) == ("4", "It is 4.")
    assert result["response"] == verify_body()["response"] | {"output": [message("It is 4.")]}
    [evaluation] = result["judge_evaluations"]
    assert evaluation == {
        "responses_create_params": outcome.judge.requests[0],
        "response": "Both are four. [[A=B]]",
        "verdict_label": "[[A=B]]",
    }
    request = outcome.judge.requests[0]
    assert request["model"] == "local-equivalence-judge"
    assert request["temperature"] == 0.0 and request["max_tokens"] == 1024 and "top_p" not in request
    assert [m["role"] for m in request["messages"]] == ["user"]
    assert "<|Question|>\nWhat is 2+2?" in request["messages"][0]["content"]


@pytest.mark.parametrize(
    ("reply", "reward", "issues"),
    [
        ("[[A!=B]]", 0.0, None),
        ("I cannot tell.", 0.0, [NO_VERDICT]),  # received but unparseable: a wrong answer, not a failure
        (None, 0.0, [UNPARSEABLE]),
        ("[[A=B]] no wait [[A!=B]]", 1.0, [CONFLICTING]),
    ],
)
def test_other_verdicts(reply: str | None, reward: float, issues: list[str] | None) -> None:
    result = verify([completion(reply)]).result
    assert result["reward"] == reward
    assert "_ng_failure_class" not in result and result["mask_sample"] is False
    assert result["judge_evaluations"][0].get("judgement_parsing_issues") == issues


def test_system_message_labels_and_sampling_come_from_the_config() -> None:
    outcome = verify(
        [completion("CORRECT")],
        judge_system_message="Be strict.",
        judge_equal_label="CORRECT",
        judge_not_equal_label="INCORRECT",
        temperature=None,
        top_p=0.9,
        max_tokens=None,
        judge_model="gpt-x",
    )
    request = outcome.judge.requests[0]
    assert request["messages"][0] == {"role": "system", "content": "Be strict."}
    assert {k: v for k, v in request.items() if k != "messages"} == {"model": "gpt-x", "top_p": 0.9}
    assert outcome.result["reward"] == 1.0


def test_an_explicit_question_wins_over_the_input() -> None:
    outcome = verify([completion("[[A=B]]")], verify_body(question="Explicit question?"))
    assert "<|Question|>\nExplicit question?\n" in outcome.judge.prompts()[0]


def test_question_and_response_regexes_narrow_what_the_judge_sees() -> None:
    body = verify_body(
        "Working...\nFINAL: 4", responses_create_params={"input": [{"role": "user", "content": "ctx\nQ: 2+2?"}]}
    )
    outcome = verify(
        [completion("[[A=B]]")], body, question_extract_regex=r"Q: (.*)", response_extract_regex=r"FINAL: (.*)"
    )
    prompt = outcome.judge.prompts()[0]
    assert "<|Question|>\n2+2?\n" in prompt and "<|Start of Answer B|>\n4\n" in prompt
    assert outcome.result["extracted_answer"] == "4"


def test_an_empty_answer_is_judged_as_the_extraction_failure_message() -> None:  # beyond the contract
    outcome = verify([completion("[[A!=B]]")], verify_body(answer="   "))
    assert "<|Start of Answer B|>\n[NO VALID ANSWER EXTRACTED]\n" in outcome.judge.prompts()[0]
    assert outcome.result["extracted_answer"] is None and outcome.result["reward"] == 0.0


def test_an_answer_over_max_answer_chars_scores_zero_without_a_judge_call() -> None:  # beyond the contract
    outcome = verify([completion("[[A=B]]")], verify_body("x" * 11), max_answer_chars=10)
    assert outcome.judge.requests == []
    assert outcome.result["reward"] == 0.0
    assert outcome.result["failure_reason"] == "final_answer_too_long: 11 characters exceeds 10"


@pytest.mark.parametrize(
    ("second", "reward_if_swap_fails", "reward"),
    [("[[A=B]]", 0.0, 1.0), ("[[A!=B]]", 0.0, 0.0), ("[[A!=B]]", -1.0, -1.0), ("garbage", 0.0, 0.0)],
)
def test_swap_check_asks_again_with_the_answers_swapped(
    second: str, reward_if_swap_fails: float, reward: float
) -> None:
    outcome = verify(
        [completion("[[A=B]]"), completion(second)],
        verify_body("four", "4"),
        check_twice_swap=True,
        reward_if_swap_fails=reward_if_swap_fails,
    )
    first_prompt, second_prompt = outcome.judge.prompts()
    assert "Answer A|>\n4\n" in first_prompt and "Answer B|>\nfour\n" in first_prompt
    assert "Answer A|>\nfour\n" in second_prompt and "Answer B|>\n4\n" in second_prompt
    assert outcome.result["reward"] == reward
    assert len(outcome.result["judge_evaluations"]) == 2


def test_swap_check_is_skipped_when_the_first_verdict_is_different() -> None:
    outcome = verify([completion("[[A!=B]]")], check_twice_swap=True)
    assert len(outcome.judge.requests) == 1 and outcome.result["reward"] == 0.0


def test_per_record_regex_rescue_gives_partial_credit() -> None:  # beyond the contract (NeMo Gym's OpenQA rescue)
    body = verify_body("The final answer is clearly 4", template_metadata={"output_regex": r"ANSWER:\s*(.+)"})
    outcome = verify([completion("[[A!=B]]"), completion("[[A=B]]")], body)
    assert outcome.result["reward"] == 0.5 and len(outcome.judge.requests) == 2


def test_a_long_expected_answer_skips_the_per_record_regex() -> None:  # beyond the contract
    long_answer = "Photosynthesis turns light into chemical energy stored in glucose, in the chloroplasts." * 2
    body = verify_body(long_answer, long_answer, template_metadata={"output_regex": r"\\boxed\{(.*?)\}"})
    outcome = verify([completion("[[A!=B]]")], body)
    assert len(outcome.judge.requests) == 1, "no rescue pass: the whole text was judged already"
    assert f"Answer B|>\n{long_answer}\n" in outcome.judge.prompts()[0]


# --- the failsafe row ------------------------------------------------------------------------------------


def test_failsafe_row_shape_as_nemo_gym_tests_pin_it() -> None:
    body = verify_body("B", "B", uuid="8ebd77ff", options=[{"A": "x"}], agent_ref={"name": "agent"})
    row = judge_failed_row(body, "RuntimeError: judge 401")
    assert row == body | {
        "metadata": None,
        "reward": 0.0,
        "mask_sample": True,
        "failure_kind": "judge_failed",
        "failure_reason": "RuntimeError: judge 401",
        "instance_config": {"mask_sample": True},
        "_ng_failure_class": "judge_failed",
        "_ng_failure_judge_error": "RuntimeError: judge 401",
    }
    assert row["response"] == body["response"]
    assert "_ng_failure_terminal" not in row


def test_failsafe_row_is_never_terminal_and_cuts_the_error_at_2000_chars() -> None:
    row = judge_failed_row(verify_body(_ng_failure_terminal=True, _ng_rollout_id="r1"), "x" * 3000)
    assert "_ng_failure_terminal" not in row and "_ng_rollout_id" not in row
    assert len(row["_ng_failure_judge_error"]) == MAX_JUDGE_ERROR_CHARS and len(row["failure_reason"]) == 3000


def test_a_judge_failure_is_a_200_row_through_the_http_protocol() -> None:
    async def scenario() -> tuple[int, dict[str, Any]]:
        judge = ScriptedJudge([status(401)])
        async with TestServer(judge.app()) as judge_server:
            server = EquivalenceJudgeServer(judge_config(str(judge_server.make_url(""))))
            async with TestClient(TestServer(build_app(server))) as client:
                reply = await client.post("/verify", data=orjson.dumps(verify_body()))
                return reply.status, await reply.json()

    code, row = run(scenario())
    assert code == 200
    assert row["_ng_failure_class"] == "judge_failed" and row["reward"] == 0.0
    assert row["_ng_failure_judge_error"].startswith("HTTP 401")


def test_a_bug_in_prompt_assembly_is_a_500_not_a_judge_failure() -> None:
    async def scenario() -> tuple[int, int]:
        judge = ScriptedJudge([completion("[[A=B]]")])
        async with TestServer(judge.app()) as judge_server:
            config = judge_config(str(judge_server.make_url("")))
            config.prompt_template = "{expected_answer} {generated_answer} {undefined}"  # bypasses validation
            async with TestClient(TestServer(build_app(EquivalenceJudgeServer(config)))) as client:
                reply = await client.post("/verify", data=orjson.dumps(verify_body()))
                return reply.status, len(judge.requests)

    assert run(scenario()) == (500, 0)


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


# --- the API key ------------------------------------------------------------------------------------------


def test_the_key_is_sent_as_a_bearer_token_and_redacted_from_an_echoing_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    outcome = verify([echo_key(401)])
    assert outcome.judge.headers[0]["Authorization"] == f"Bearer {KEY}"
    row_text = orjson.dumps(outcome.result).decode()
    assert KEY not in row_text and "Incorrect API key provided: Bearer [REDACTED]" in row_text


def test_the_key_is_redacted_from_a_judge_reply_that_quotes_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    outcome = verify([echo_key(200)])
    assert outcome.result["reward"] == 1.0 and KEY not in orjson.dumps(outcome.result).decode()


def test_no_key_no_authorization_header() -> None:
    assert "Authorization" not in verify([completion("[[A=B]]")]).judge.headers[0]


def test_the_key_is_not_in_reprs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)

    async def scenario() -> str:
        server = EquivalenceJudgeServer(judge_config("http://127.0.0.1:9"))
        await server.open()
        try:
            return repr(server.__dict__) + repr(server._client)
        finally:
            await server.close()

    assert KEY not in run(scenario())
    assert os.environ[KEY_ENV] == KEY


@pytest.mark.parametrize(
    "fields",
    [{"api_key": KEY}, {"judge_api_key": KEY}, {"api_key_env": KEY}],
)
def test_a_key_pasted_into_the_config_is_refused_without_echoing_it(fields: dict[str, str]) -> None:
    block = ServerBlock("judge", "equivalence_judge", fields)
    with pytest.raises(ReverifyError) as caught:
        validate_builtin_block(block)
    assert KEY not in str(caught.value) and "judge.resources_servers.equivalence_judge" in str(caught.value)


# --- registry, mode and metrics -----------------------------------------------------------------------------


def test_registered_as_a_stateless_builtin_that_accepts_pasted_nemo_gym_fields() -> None:
    fields = {
        "judge_base_url": "http://127.0.0.1:8765",
        "entrypoint": "app.py",
        "domain": "knowledge",
        "verified": False,
    }
    server = build_server(ServerBlock("judge", "equivalence_judge", fields))
    assert isinstance(server, EquivalenceJudgeServer)
    assert server.reverify_mode is ReverifyMode.STATELESS
    assert "stateless" in (EquivalenceJudgeServer.__doc__ or "")


@pytest.mark.parametrize(
    ("tasks", "metrics"),
    [
        ([], {}),
        ([[{"reward": 0.0}, {"judge_evaluations": []}]], {}),
        ([[{"judge_evaluations": [{"verdict_label": "[[A=B]]"}]}]], {ISSUE_RATE: 0.0}),
        (
            [
                [
                    {
                        "judge_evaluations": [
                            {"judgement_parsing_issues": [NO_VERDICT]},
                            {"judgement_parsing_issues": [NO_VERDICT]},
                        ]
                    }
                ],
                [
                    {"judge_evaluations": [{}]},
                    {"judge_evaluations": [{"judgement_parsing_issues": [TRUNCATED, NO_VERDICT]}]},
                ],
            ],
            {ISSUE_RATE: 2 / 3, f"{ISSUE_RATE}/{NO_VERDICT}": 2 / 3, f"{ISSUE_RATE}/{TRUNCATED}": 1 / 3},
        ),
    ],
)
def test_parsing_issue_metrics(tasks: list[list[dict[str, Any]]], metrics: dict[str, float]) -> None:
    assert compute_metrics(tasks) == pytest.approx(metrics)


def test_aggregate_metrics_add_the_issue_rate_to_the_key_metrics() -> None:
    rows = [
        {
            "_ng_task_index": 0,
            "_ng_rollout_index": 0,
            "reward": 1.0,
            "judge_evaluations": [{"verdict_label": "[[A=B]]"}],
        },
        {
            "_ng_task_index": 1,
            "_ng_rollout_index": 0,
            "reward": 0.0,
            "judge_evaluations": [{"verdict_label": None, "judgement_parsing_issues": [NO_VERDICT]}],
        },
    ]
    answer = EquivalenceJudgeServer(EquivalenceJudgeConfig()).aggregate_metrics(rows)
    assert answer["key_metrics"]["mean/reward"] == 0.5
    assert answer["key_metrics"][ISSUE_RATE] == 0.5
    assert answer["agent_metrics"][f"{ISSUE_RATE}/{NO_VERDICT}"] == 0.5
