"""A local OpenAI-compatible judge model: ``POST /v1/chat/completions`` answered by a deterministic rule.

Routes:

* ``POST /v1/chat/completions``: a ``chat.completion`` whose message is the verdict of
  :mod:`verdict_rule` for the last user message (HTTP 400 when that message lacks the answer markers).
* ``POST /v1/responses``: the same verdict as a Responses API ``response``, for the input's last user message.
  NeMo Gym's model servers (``responses_api_models/openai_model``) call this route of their upstream, so a NeMo
  Gym judge server can use this model through one of them.
* ``GET /v1/models``: the one model.
* ``POST /control``: change the failure knobs of :mod:`settings` at run time (JSON with any of them, plus
  ``"reset_stats": true``); ``GET /control`` shows them.
* ``GET /stats``: request counts, so a test can tell how many attempts a client made.

Two directives in the prompt (e.g. in a dataset's question) change one reply, for tests and the demo:
``LOCAL-JUDGE:GARBAGE`` answers text with no verdict label, ``LOCAL-JUDGE:NOT-A-COMPLETION`` answers HTTP
200 with a JSON body that is not a chat completion.

With ``api_key`` set, a request must carry ``Authorization: Bearer <api_key>`` or gets HTTP 401. The key is
never echoed, logged or counted by value.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import math
import random
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web
from pydantic import ValidationError

from reverify_assets.local_judge.settings import FailureSettings, RequestBucket, share_hit
from reverify_assets.local_judge.verdict_rule import MissingMarkers, verdict_reply

MODEL_NAME = "local-equivalence-judge"
GARBAGE_DIRECTIVE = "LOCAL-JUDGE:GARBAGE"
NOT_A_COMPLETION_DIRECTIVE = "LOCAL-JUDGE:NOT-A-COMPLETION"
EQUAL_VERDICT, NOT_EQUAL_VERDICT = "[[A=B]]", "[[A!=B]]"
GARBAGE_REPLY = "Hmm, both answers look interesting; I would rather not commit to anything today."


@dataclass
class JudgeModelStats:
    requests: int = 0  # every POST to a model route, whatever became of it
    answered: int = 0
    failed: int = 0  # injected failures (fail_share, outage)
    throttled: int = 0  # HTTP 429 for going over rate_limit_rps
    flipped: int = 0  # verdicts turned into their opposite (flip_share)
    unauthorized: int = 0
    bad_requests: int = 0
    bearer_requests: int = 0  # requests that carried a Bearer token (its value is never kept)
    in_flight: int = 0
    most_in_flight: int = 0  # requests being answered at once, at most: how concurrently a client asks
    by_status: Counter[int] = field(default_factory=Counter)
    verdicts: Counter[str] = field(default_factory=Counter)

    def as_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "answered": self.answered,
            "failed": self.failed,
            "throttled": self.throttled,
            "flipped": self.flipped,
            "unauthorized": self.unauthorized,
            "bad_requests": self.bad_requests,
            "bearer_requests": self.bearer_requests,
            "most_in_flight": self.most_in_flight,
            "by_status": {str(status): count for status, count in sorted(self.by_status.items())},
            "verdicts": dict(sorted(self.verdicts.items())),
        }


def _json(value: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(value), status=status, content_type="application/json")


def _error(status: int, message: str, kind: str, code: str | None = None) -> web.Response:
    """OpenAI's error body shape."""
    return _json({"error": {"message": message, "type": kind, "param": None, "code": code}}, status=status)


def last_user_prompt(messages: Sequence[Any]) -> str:
    for message in reversed(messages):
        if isinstance(message, Mapping) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, Sequence):
                return "".join(p["text"] for p in content if isinstance(p, Mapping) and isinstance(p.get("text"), str))
    return ""


class JudgeModel:
    def __init__(
        self,
        settings: FailureSettings | None = None,
        *,
        api_key: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings or FailureSettings()
        self.stats = JudgeModelStats()
        self._api_key = api_key or None
        self._clock = clock
        self._outage_since = clock()
        self._bucket = self._new_bucket()
        self._flips = random.Random(self.settings.seed)

    def _new_bucket(self) -> RequestBucket | None:
        rate = self.settings.rate_limit_rps
        return None if rate is None else RequestBucket(rate, self._clock())

    def __repr__(self) -> str:
        return f"JudgeModel(settings={self.settings.public()}, api_key={'set' if self._api_key else 'unset'})"

    def configure(self, changes: Mapping[str, Any]) -> None:
        """Apply knob changes (ValidationError leaves the settings as they were)."""
        changes = dict(changes)
        if changes.pop("reset_stats", False):
            self.stats = JudgeModelStats()
        if not changes:
            return
        self.settings = FailureSettings.model_validate({**self.settings.model_dump(), **changes})
        if "outage" in changes:
            self._outage_since = self._clock()
        if "rate_limit_rps" in changes:
            self._bucket = self._new_bucket()
        if "seed" in changes or "flip_share" in changes:
            self._flips = random.Random(self.settings.seed)

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 << 20)
        app.router.add_post("/v1/chat/completions", self._chat_completions)
        app.router.add_post("/v1/responses", self._responses)
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/control", self._control)
        app.router.add_get("/control", self._show_control)
        app.router.add_get("/stats", self._stats)
        return app

    def _failing(self, content: bytes) -> bool:
        outage = self.settings.outage
        if outage is not None and outage.covers(self._clock() - self._outage_since):
            return True
        return share_hit(self.settings.seed, content, self.settings.fail_share)

    def _authorized(self, request: web.Request) -> bool:
        header = request.headers.get("Authorization", "")
        token = header[len("Bearer ") :] if header.startswith("Bearer ") else None
        if token is not None:
            self.stats.bearer_requests += 1
        if self._api_key is None:
            return True
        return token is not None and hmac.compare_digest(token.encode(), self._api_key.encode())

    async def _chat_completions(self, request: web.Request) -> web.Response:
        response = await self._answer(request, CHAT_COMPLETIONS)
        self.stats.by_status[response.status] += 1
        return response

    async def _responses(self, request: web.Request) -> web.Response:
        response = await self._answer(request, RESPONSES)
        self.stats.by_status[response.status] += 1
        return response

    async def _answer(self, request: web.Request, api: ModelApi) -> web.Response:
        self.stats.in_flight += 1
        self.stats.most_in_flight = max(self.stats.most_in_flight, self.stats.in_flight)
        try:
            return await self._answer_one(request, api)
        finally:
            self.stats.in_flight -= 1

    async def _answer_one(self, request: web.Request, api: ModelApi) -> web.Response:
        self.stats.requests += 1
        if not self._authorized(request):
            self.stats.unauthorized += 1
            return _error(401, "Incorrect API key provided.", "invalid_request_error", "invalid_api_key")
        if self._bucket is not None and (wait_s := self._bucket.take(self._clock())) > 0:
            self.stats.throttled += 1
            response = _error(429, "local judge model: rate limit reached", "rate_limit_exceeded")
            response.headers["Retry-After"] = str(math.ceil(wait_s))
            response.headers["retry-after-ms"] = str(math.ceil(wait_s * 1000))
            return response
        try:
            body = orjson.loads(await request.read())
        except orjson.JSONDecodeError:
            body = None
        messages = api.messages(body) if isinstance(body, dict) else None
        if not messages:
            self.stats.bad_requests += 1
            return _error(400, f"the request needs a non-empty `{api.messages_field}`", "invalid_request_error")
        if body.get("stream"):
            self.stats.bad_requests += 1
            return _error(400, "streaming is not supported by the local judge model", "invalid_request_error")
        if self.settings.latency_ms:
            await asyncio.sleep(self.settings.latency_ms / 1000)
        content = orjson.dumps(messages, option=orjson.OPT_SORT_KEYS)
        if self._failing(content):
            self.stats.failed += 1
            status = self.settings.fail_status
            return _error(status, f"local judge model: injected failure (HTTP {status})", "injected_failure")
        prompt = last_user_prompt(messages)
        if NOT_A_COMPLETION_DIRECTIVE in prompt:
            self.stats.verdicts["not_a_completion"] += 1
            return _json({"object": "not.a.chat.completion", "detail": "asked not to answer a chat completion"})
        if GARBAGE_DIRECTIVE in prompt:
            reply, kind = GARBAGE_REPLY, "garbage"
        else:
            try:
                reply = verdict_reply(prompt)
            except MissingMarkers as exc:
                self.stats.bad_requests += 1
                return _error(400, f"local judge model: {exc}", "invalid_request_error")
            if self.settings.flip_share and self._flips.random() < self.settings.flip_share:
                reply = _flipped(reply)
                self.stats.flipped += 1
            kind = "equal" if reply.endswith(EQUAL_VERDICT) else "not_equal"
        self.stats.verdicts[kind] += 1
        self.stats.answered += 1
        return _json(api.reply(body, content, prompt, reply))

    async def _models(self, _: web.Request) -> web.Response:
        return _json(
            {
                "object": "list",
                "data": [{"id": MODEL_NAME, "object": "model", "created": 0, "owned_by": "reverify-assets"}],
            }
        )

    async def _control(self, request: web.Request) -> web.Response:
        try:
            changes = orjson.loads(await request.read())
        except orjson.JSONDecodeError:
            changes = None
        if not isinstance(changes, dict):
            return _json({"detail": "POST /control takes a JSON object of knobs"}, status=422)
        try:
            self.configure(changes)
        except (ValidationError, ValueError) as exc:
            return _json({"detail": str(exc)}, status=422)
        return await self._show_control(request)

    async def _show_control(self, _: web.Request) -> web.Response:
        return _json(self.settings.public())

    async def _stats(self, _: web.Request) -> web.Response:
        return _json(self.stats.as_dict())


def _flipped(reply: str) -> str:
    if reply.endswith(EQUAL_VERDICT):
        return reply.removesuffix(EQUAL_VERDICT) + NOT_EQUAL_VERDICT
    return reply.removesuffix(NOT_EQUAL_VERDICT) + EQUAL_VERDICT


def _model_of(body: Mapping[str, Any]) -> str:
    model = body.get("model")
    return model if isinstance(model, str) and model else MODEL_NAME


def _chat_messages(body: Mapping[str, Any]) -> list[Any] | None:
    messages = body.get("messages")
    return messages if isinstance(messages, list) and messages else None


def _completion(body: Mapping[str, Any], content: bytes, prompt: str, reply: str) -> dict[str, Any]:
    prompt_tokens, completion_tokens = len(prompt.split()), len(reply.split())
    return {
        "id": f"chatcmpl-{hashlib.sha256(content).hexdigest()[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": _model_of(body),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": reply},
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def _response_input(body: Mapping[str, Any]) -> list[Any] | None:
    """The Responses API's ``input``: a string (one user message) or a list of input items."""
    given = body.get("input")
    if isinstance(given, str) and given:
        return [{"role": "user", "content": given}]
    return given if isinstance(given, list) and given else None


def _response(body: Mapping[str, Any], content: bytes, prompt: str, reply: str) -> dict[str, Any]:
    """A ``response`` object with every field NeMo Gym's ``NeMoGymResponse`` (openai's ``Response``) requires."""
    input_tokens, output_tokens = len(prompt.split()), len(reply.split())
    digest = hashlib.sha256(content).hexdigest()[:24]
    return {
        "id": f"resp_{digest}",
        "object": "response",
        "created_at": int(time.time()),
        "model": _model_of(body),
        "status": "completed",
        "output": [
            {
                "id": f"msg_{digest}",
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": reply, "annotations": []}],
            }
        ],
        "parallel_tool_calls": False,
        "tool_choice": "none",
        "tools": [],
        "usage": {
            "input_tokens": input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": input_tokens + output_tokens,
        },
    }


@dataclass(frozen=True)
class ModelApi:
    """Where one OpenAI API carries the conversation in a request, and how it wraps a reply."""

    messages_field: str
    messages: Callable[[Mapping[str, Any]], list[Any] | None]
    reply: Callable[[Mapping[str, Any], bytes, str, str], dict[str, Any]]


CHAT_COMPLETIONS = ModelApi("messages", _chat_messages, _completion)
RESPONSES = ModelApi("input", _response_input, _response)
