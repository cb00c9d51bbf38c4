"""The built-in ``equivalence_judge`` resources server (NeMo Gym's ``equivalence_llm_judge`` semantics)."""

from __future__ import annotations

import asyncio
import os
import random
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import aiohttp

from reverify_assets.judge_cache.store import JudgeCallCache
from reverify_assets.processes import secrets as process_secrets
from reverify_assets.rows.adaptive_limit import AdaptiveLimit
from reverify_assets.rows.routed_row import CACHED_EVALUATION_FIELD, USAGE_FIELD
from reverify_assets.servers.judge import metrics as judge_metrics
from reverify_assets.servers.judge.config import EquivalenceJudgeConfig
from reverify_assets.servers.judge.failsafe import JudgeCallFailed, judge_failed_row
from reverify_assets.servers.judge.judge_client import JudgeClient, JudgeReply, Sleep, chat_completions_url
from reverify_assets.servers.judge.prompt import (
    fill_prompt,
    judge_messages,
    last_assistant_text,
    last_user_text,
    narrow,
)
from reverify_assets.servers.judge.verdict import Verdict, parse_verdict
from reverify_assets.servers.protocol import BadVerifyRequest, MetricsHooks, ResourcesServer, ReverifyMode

__all__ = ["EquivalenceJudgeConfig", "EquivalenceJudgeServer", "JudgeRequest", "parse_request"]

Evaluation = dict[str, Any]

# judge_endpoint_max_concurrency: null: no limit of ours until the judge throttles, then the adapted one.
UNLIMITED_JUDGE_CALLS = 1024


@dataclass(frozen=True, slots=True)
class JudgeRequest:
    body: Mapping[str, Any]
    response: Mapping[str, Any]
    expected_answer: str
    question: str | None
    per_record_regex: str | None


def parse_request(body: Mapping[str, Any]) -> JudgeRequest:
    """The fields grading needs; BadVerifyRequest (HTTP 422) names the first one that is missing or wrong."""
    response = body.get("response")
    if not isinstance(response, Mapping):
        raise BadVerifyRequest("`response` must be an object (a Responses API response)")
    params = body.get("responses_create_params")
    if params is not None and not isinstance(params, Mapping):
        raise BadVerifyRequest("`responses_create_params` must be an object")
    for name, kind, types in (
        ("question", "a string", (str,)),
        ("options", "a list of single-key objects", (list,)),
        ("metadata", "an object", (Mapping,)),
        ("uuid", "a string or an integer", (str, int)),
    ):
        if body.get(name) is not None and not isinstance(body[name], types):
            raise BadVerifyRequest(f"`{name}` must be {kind}")
    template_metadata = body.get("template_metadata")
    regex = template_metadata.get("output_regex") if isinstance(template_metadata, Mapping) else None
    return JudgeRequest(
        body=body,
        response=response,
        expected_answer=_expected_answer(body),
        question=body.get("question"),
        per_record_regex=regex if isinstance(regex, str) and regex else None,
    )


def _expected_answer(body: Mapping[str, Any]) -> str:
    """``expected_answer``, else ``metadata.expected_answer`` (as NeMo Gym falls back to it)."""
    expected = body.get("expected_answer")
    if expected is not None and not isinstance(expected, str):
        raise BadVerifyRequest("`expected_answer` must be a string")
    if expected:
        return expected
    metadata = body.get("metadata")
    if isinstance(metadata, Mapping) and metadata.get("expected_answer") is not None:
        return str(metadata["expected_answer"])
    if expected is None:
        raise BadVerifyRequest("`expected_answer` is required (a string)")
    return expected


@dataclass(frozen=True, slots=True)
class FirstJudgement:
    """What the first judge call of a row compares: the question, and the answer as given to the judge."""

    question: str
    generated: str  # the extracted answer, or the extraction-failure message
    extracted: str | None
    answer_text: str  # the response's whole last assistant text


def first_judgement(cfg: EquivalenceJudgeConfig, request: JudgeRequest) -> FirstJudgement | str:
    """The first call's terms, or the failure reason of a row graded without any call (an answer too long)."""
    answer_text = last_assistant_text(request.response)
    if cfg.max_answer_chars is not None and len(answer_text) > cfg.max_answer_chars:
        return f"final_answer_too_long: {len(answer_text)} characters exceeds {cfg.max_answer_chars}"
    question = request.question
    if question is None:
        question = narrow(last_user_text(request.body.get("responses_create_params")), cfg.question_extract_regex)
    extracted = narrow(answer_text, _extraction_regex(cfg, request)) if answer_text else None
    generated = extracted if extracted is not None else cfg.msg_extraction_failure
    return FirstJudgement(question, generated, extracted, answer_text)


def judge_request(
    cfg: EquivalenceJudgeConfig, question: str, expected_answer: str, generated_answer: str
) -> dict[str, Any]:
    """The chat completion request of one judge call, as sent (and as the judge-call cache keys it)."""
    prompt = fill_prompt(
        cfg.prompt_template, question=question, expected_answer=expected_answer, generated_answer=generated_answer
    )
    messages = judge_messages(cfg.judge_system_message, prompt)
    return {"model": cfg.judge_model, "messages": messages, **cfg.sampling_params()}


def may_judge_twice(cfg: EquivalenceJudgeConfig, request: JudgeRequest) -> bool:
    """Whether a row the first call finds not equal is judged again on the whole text (partial credit)."""
    if _per_record_regex_skipped(cfg, request):
        return False
    return cfg.check_full_generation_on_fail and cfg.use_per_record_regex and request.per_record_regex is not None


def _extraction_regex(cfg: EquivalenceJudgeConfig, request: JudgeRequest) -> str | None:
    if cfg.use_per_record_regex and request.per_record_regex:
        return None if _per_record_regex_skipped(cfg, request) else request.per_record_regex
    return cfg.response_extract_regex


def _per_record_regex_skipped(cfg: EquivalenceJudgeConfig, request: JudgeRequest) -> bool:
    """A long expected answer is judged against the whole text, and then needs no second pass."""
    return (
        cfg.use_per_record_regex
        and request.per_record_regex is not None
        and cfg.extraction_length_threshold is not None
        and len(request.expected_answer) > cfg.extraction_length_threshold
    )


class EquivalenceJudgeServer(ResourcesServer):
    """Asks an LLM judge whether the response's answer is equivalent to the expected one.

    ``reverify_mode`` is ``stateless``: the grade is computed from the verify request alone (the stored
    response, the expected answer, the question) plus this server's config; no ``/seed_session`` state is
    read or needed, so re-verifying a stored rollout asks the judge exactly what verifying it asked.
    What that does *not* promise: the same reward. An LLM judge is a remote model; another sampling, a
    provider's silent model update or a different ``judge_model``/prompt can change its verdict.
    ``temperature: 0`` and a pinned model make it as repeatable as the provider allows, and a judge that
    could not be called never scores a row (the row goes to the failures sidecar, retryable).
    """

    reverify_mode: ClassVar[ReverifyMode] = ReverifyMode.STATELESS
    metrics_hooks: ClassVar[MetricsHooks] = MetricsHooks(judge_metrics.compute_metrics, judge_metrics.get_key_metrics)

    calls_a_judge: ClassVar[bool] = True

    def __init__(
        self,
        config: EquivalenceJudgeConfig,
        *,
        judge_cache: Path | None = None,
        sleep: Sleep = asyncio.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self.config = config
        self._cache_path = judge_cache
        self._sleep = sleep  # injectable so tests never wait out a backoff
        self._rng = rng
        self._session: aiohttp.ClientSession | None = None
        self._client: JudgeClient | None = None
        self._cache: JudgeCallCache | None = None

    async def open(self) -> None:
        cfg = self.config
        # Read at start-up, never stored in the config: the key exists only in the client's headers, and in the
        # redactor of everything this process writes, logs or raises.
        api_key = os.environ.get(cfg.api_key_env) if cfg.api_key_env else None
        process_secrets.remember([api_key])
        self._cache = None if self._cache_path is None else JudgeCallCache(self._cache_path)
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=cfg.judge_endpoint_max_concurrency or 0)
        )
        self._client = JudgeClient(
            url=chat_completions_url(cfg.judge_base_url),
            api_key=api_key,
            retry=cfg.retry_policy(),
            session=self._session,
            redact=process_secrets.redact,
            sleep=self._sleep,
            rng=self._rng,
            limit=AdaptiveLimit(cfg.judge_endpoint_max_concurrency or UNLIMITED_JUDGE_CALLS, sleep=self._sleep),
            cache=self._cache,
        )

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
        if self._cache is not None:
            self._cache.close()
        self._session = self._client = self._cache = None

    async def verify(self, body: dict[str, Any]) -> dict[str, Any]:
        request = parse_request(body)
        try:
            return await self._grade(request)
        except JudgeCallFailed as exc:
            # Only the judge client raises this, and only for a failed call: a bug anywhere else in grading
            # still propagates (HTTP 500) instead of being filed as a judge outage.
            return judge_failed_row(body, str(exc))

    async def _grade(self, request: JudgeRequest) -> dict[str, Any]:
        cfg = self.config
        expected = request.expected_answer
        first = first_judgement(cfg, request)
        if isinstance(first, str):
            return self._result(request, 0.0, None, [], failure_reason=first)
        question, generated, extracted = first.question, first.generated, first.extracted

        equal, evaluation = await self._evaluate(question, expected, generated)
        if not equal:
            if not may_judge_twice(cfg, request):
                return self._result(request, 0.0, extracted, [evaluation])
            # The per-record regex may have cut the answer wrongly: judge the whole text for partial credit.
            whole = first.answer_text or cfg.msg_extraction_failure
            rescued, second = await self._evaluate(question, expected, whole)
            reward = cfg.reward_if_full_generation_succeeds if rescued else 0.0
            return self._result(request, reward, extracted, [evaluation, second])
        if not cfg.check_twice_swap or _per_record_regex_skipped(cfg, request):
            return self._result(request, 1.0, extracted, [evaluation])
        # Same question with the answers swapped: a judge with a positional bias must agree both ways.
        swapped, second = await self._evaluate(question, generated, expected)
        return self._result(request, 1.0 if swapped else cfg.reward_if_swap_fails, extracted, [evaluation, second])

    async def _evaluate(self, question: str, expected_answer: str, generated_answer: str) -> tuple[bool, Evaluation]:
        cfg = self.config
        request = judge_request(cfg, question, expected_answer, generated_answer)
        if self._client is None:
            raise RuntimeError("the equivalence judge server was not opened")

        def verdict_of(reply: JudgeReply) -> Verdict:
            labels = {"equal_label": cfg.judge_equal_label, "not_equal_label": cfg.judge_not_equal_label}
            return parse_verdict(reply.text, **labels, truncated=reply.truncated)

        reply = await self._client.complete(request, worth_keeping=lambda kept: verdict_of(kept).label is not None)
        verdict = verdict_of(reply)
        evaluation: Evaluation = {
            "responses_create_params": request,
            "response": reply.text,
            "verdict_label": verdict.label,
        }
        if verdict.issues:  # as NeMo Gym: absent when the reply read cleanly
            evaluation["judgement_parsing_issues"] = list(verdict.issues)
        if reply.usage is not None:  # what the call cost: a run's --max-cost counts it (`rows.routed_row`)
            evaluation[USAGE_FIELD] = reply.usage
        if reply.cached:  # which verdicts cost no call: the run counts them
            evaluation[CACHED_EVALUATION_FIELD] = True
        return verdict.equal, evaluation

    @staticmethod
    def _result(
        request: JudgeRequest,
        reward: float,
        extracted: str | None,
        evaluations: list[Evaluation],
        *,
        failure_reason: str | None = None,
    ) -> dict[str, Any]:
        return {
            "responses_create_params": request.body.get("responses_create_params"),
            "response": request.response,
            "reward": reward,
            "mask_sample": False,
            "failure_kind": None,
            "failure_reason": failure_reason,
            "expected_answer": request.expected_answer,
            "extracted_answer": extracted or None,
            "judge_evaluations": evaluations,
        }
