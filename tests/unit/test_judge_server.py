"""The ``equivalence_judge`` server against a scripted judge on loopback: verdicts, prompts, failsafe rows, key
redaction, registry and metrics (its retries: ``test_judge_retries``).

Rows marked "beyond the contract" pin NeMo Gym behaviour read from its ``equivalence_llm_judge`` source.
"""

from __future__ import annotations

import os
from typing import Any

import orjson
import pytest
from aiohttp.test_utils import TestClient, TestServer

from reverify_assets.config.topology import ServerBlock
from reverify_assets.errors import ConfigError
from reverify_assets.servers.app import build_app
from reverify_assets.servers.judge.config import EquivalenceJudgeConfig
from reverify_assets.servers.judge.failsafe import MAX_JUDGE_ERROR_CHARS, judge_failed_row
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
from tests.support.scripted_judge import (
    KEY,
    KEY_ENV,
    ScriptedJudge,
    completion,
    echo_key,
    judge_config,
    run,
    status,
    verify,
    verify_body,
)


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
    with pytest.raises(BadVerifyRequest) as caught:
        parse_request(body)
    assert error in str(caught.value)  # the 422's detail: no field names the request's field


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
    ("fields", "key"),
    [
        ({"api_key": KEY}, "judge.resources_servers.equivalence_judge"),
        ({"judge_api_key": KEY}, "judge.resources_servers.equivalence_judge"),
        ({"api_key_env": KEY}, "judge.resources_servers.equivalence_judge.api_key_env"),
    ],
)
def test_a_key_pasted_into_the_config_is_refused_without_echoing_it(fields: dict[str, str], key: str) -> None:
    block = ServerBlock("judge", "equivalence_judge", fields)
    with pytest.raises(ConfigError) as caught:
        validate_builtin_block(block)
    assert caught.value.key == key
    assert KEY not in str(caught.value) and KEY not in repr(vars(caught.value))


# --- registry, mode and metrics -----------------------------------------------------------------------------


def test_registered_as_a_stateless_builtin_that_accepts_pasted_nemo_gym_fields() -> None:
    fields = {
        "judge_base_url": "http://127.0.0.1:8765",
        "entrypoint": "app.py",
        "domain": "knowledge",
        "verified": False,
    }
    server = build_server(ServerBlock("judge", "equivalence_judge", fields), judge_cache=None)
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
