"""A local OpenAI-compatible judge model: ``POST /v1/chat/completions`` answered by a deterministic rule.

Routes:

* ``POST /v1/chat/completions``: a ``chat.completion`` whose message is the verdict of
  :mod:`verdict_rule` for the last user message (HTTP 400 when that message lacks the answer markers).
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
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web
from pydantic import ValidationError

from reverify_assets.judge_model.settings import FailureSettings, share_hit
from reverify_assets.judge_model.verdict_rule import MissingMarkers, verdict_reply

MODEL_NAME = "local-equivalence-judge"
GARBAGE_DIRECTIVE = "LOCAL-JUDGE:GARBAGE"
NOT_A_COMPLETION_DIRECTIVE = "LOCAL-JUDGE:NOT-A-COMPLETION"
GARBAGE_REPLY = "Hmm, both answers look interesting; I would rather not commit to anything today."


@dataclass
class JudgeModelStats:
    requests: int = 0  # every POST /v1/chat/completions, whatever became of it
    answered: int = 0
    failed: int = 0  # injected failures (fail_share, outage)
    unauthorized: int = 0
    bad_requests: int = 0
    bearer_requests: int = 0  # requests that carried a Bearer token (its value is never kept)
    by_status: Counter[int] = field(default_factory=Counter)
    verdicts: Counter[str] = field(default_factory=Counter)

    def as_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "answered": self.answered,
            "failed": self.failed,
            "unauthorized": self.unauthorized,
            "bad_requests": self.bad_requests,
            "bearer_requests": self.bearer_requests,
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

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 << 20)
        app.router.add_post("/v1/chat/completions", self._chat_completions)
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
        response = await self._answer(request)
        self.stats.by_status[response.status] += 1
        return response

    async def _answer(self, request: web.Request) -> web.Response:
        self.stats.requests += 1
        if not self._authorized(request):
            self.stats.unauthorized += 1
            return _error(401, "Incorrect API key provided.", "invalid_request_error", "invalid_api_key")
        try:
            body = orjson.loads(await request.read())
        except orjson.JSONDecodeError:
            body = None
        messages = body.get("messages") if isinstance(body, dict) else None
        if not isinstance(messages, list) or not messages:
            self.stats.bad_requests += 1
            return _error(400, "the request needs a non-empty `messages` list", "invalid_request_error")
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
            kind = "equal" if reply.endswith("[[A=B]]") else "not_equal"
        self.stats.verdicts[kind] += 1
        self.stats.answered += 1
        return _json(self._completion(body, content, prompt, reply))

    @staticmethod
    def _completion(body: Mapping[str, Any], content: bytes, prompt: str, reply: str) -> dict[str, Any]:
        prompt_tokens, completion_tokens = len(prompt.split()), len(reply.split())
        model = body.get("model")
        return {
            "id": f"chatcmpl-{hashlib.sha256(content).hexdigest()[:24]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model if isinstance(model, str) and model else MODEL_NAME,
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
