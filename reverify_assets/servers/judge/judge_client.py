"""One judge call over an OpenAI-compatible ``POST /v1/chat/completions``, with NeMo Gym's retry rules.

As NeMo Gym's ``call_judge``: a 408, 429 or 5xx reply, a timeout or a lost connection is tried again, up
to ``max_attempts`` attempts with full-jitter exponential backoff; any other 4xx (a bad key, a bad request)
and a reply that is not a chat completion fail at once, since they would fail the same way again. The
status is checked before the body is parsed, so a 401 reports "HTTP 401", not a parse error of its body.
Every message goes through the redactor: no run of 8 characters of the API key is in a reason we hand back.

Better than NeMo Gym: a throttled reply (429, or 503 with ``Retry-After``) halves the calls in flight
(``rows.adaptive_limit``), and one that says how long to wait (``Retry-After``) is waited out without spending an
attempt, so a throttled judge makes a run slower, not its rows ``judge_failed``. With a ``cache``
(``judge_cache.store``), a request asked before is answered from it, and a new answer is kept there.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson

from reverify_assets.judge_cache.store import JudgeCallCache, request_key
from reverify_assets.rows.adaptive_limit import AdaptiveLimit
from reverify_assets.rows.verifier_wire import (
    RetryPolicy,
    ThrottleWaits,
    asked_wait_s,
    is_retryable_status,
    is_throttled,
)
from reverify_assets.servers.judge.failsafe import JudgeCallFailed

Sleep = Callable[[float], Awaitable[Any]]
BODY_SNIPPET_CHARS = 500
CACHED_REPLY_KIND = "chat_completion_reply"  # a JudgeReply's text and finish reason, as JSON


@dataclass(frozen=True, slots=True)
class JudgeReply:
    text: str | None  # None: the completion carried no text at all
    finish_reason: str | None
    cached: bool = False  # answered by the judge-call cache, without a call
    usage: dict[str, int] | None = None  # the tokens the judge says it billed: prompt_tokens, completion_tokens

    @property
    def truncated(self) -> bool:
        return self.finish_reason == "length"


class _RetryableFailure(Exception):
    """An attempt failed in a way another attempt may not."""


class _Throttled(_RetryableFailure):
    """The judge asked us to slow down (HTTP 429 or 503), saying how long to wait, or not."""

    def __init__(self, reason: str, wait_s: float | None) -> None:
        super().__init__(reason)
        self.wait_s = wait_s


def chat_completions_url(base_url: str) -> str:
    """``{base}/v1/chat/completions``, whether or not the configured base already ends in ``/v1``."""
    base = base_url.rstrip("/")
    if base.endswith("/v1"):
        base = base[: -len("/v1")]
    return f"{base}/v1/chat/completions"


def _describe(exc: BaseException) -> str:
    """NeMo Gym's wording: the exception class name, then its text."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _snippet(payload: bytes) -> str:
    text = payload.decode(errors="replace").strip()
    return text if len(text) <= BODY_SNIPPET_CHARS else text[:BODY_SNIPPET_CHARS] + "…"


def _message_text(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        texts = [part["text"] for part in content if isinstance(part, Mapping) and isinstance(part.get("text"), str)]
        return "".join(texts) if texts else None
    return None


def _cached_reply(stored: bytes | None) -> JudgeReply | None:
    """None for a miss, and for an entry this version cannot read (it is then asked, and overwritten)."""
    if stored is None:
        return None
    try:
        kept = orjson.loads(stored)
        text, finish_reason = kept["text"], kept["finish_reason"]
    except (orjson.JSONDecodeError, TypeError, KeyError):
        return None
    if not (text is None or isinstance(text, str)) or not (finish_reason is None or isinstance(finish_reason, str)):
        return None
    return JudgeReply(text, finish_reason, cached=True, usage=_usage(kept.get("usage")))


USAGE_FIELDS = ("prompt_tokens", "completion_tokens")


def _usage(usage: Any) -> dict[str, int] | None:
    """A chat completion's token counts, when it gives both as numbers."""
    if not isinstance(usage, Mapping):
        return None
    counts = {name: usage.get(name) for name in USAGE_FIELDS}
    if not all(isinstance(count, int) and not isinstance(count, bool) and count >= 0 for count in counts.values()):
        return None
    return counts  # type: ignore[return-value]


def parse_chat_completion(payload: bytes) -> JudgeReply:
    """The first choice's message text; ValueError when the body is not a chat completion."""
    try:
        body = orjson.loads(payload)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"the judge's HTTP 200 reply is not JSON: {_snippet(payload)}") from exc
    choices = body.get("choices") if isinstance(body, Mapping) else None
    if not isinstance(choices, Sequence) or not choices or not isinstance(choices[0], Mapping):
        raise ValueError(f"the judge's HTTP 200 reply is not a chat completion (no `choices`): {_snippet(payload)}")
    message = choices[0].get("message")
    if not isinstance(message, Mapping):
        raise ValueError(f"the judge's HTTP 200 reply has no `choices[0].message`: {_snippet(payload)}")
    finish_reason = choices[0].get("finish_reason")
    return JudgeReply(
        _message_text(message.get("content")),
        finish_reason if isinstance(finish_reason, str) else None,
        usage=_usage(body.get("usage")),
    )


class JudgeClient:
    def __init__(
        self,
        *,
        url: str,
        api_key: str | None,
        retry: RetryPolicy,
        session: aiohttp.ClientSession,
        redact: Callable[[str], str],
        sleep: Sleep = asyncio.sleep,
        rng: random.Random | None = None,
        limit: AdaptiveLimit,
        cache: JudgeCallCache | None = None,
    ) -> None:
        """``limit``: how many calls are in flight at once, cut when the judge throttles."""
        self.url = url
        self.limit = limit
        self.cache = cache
        self.retry = retry
        self.session = session
        self.redact = redact
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._headers = {"Content-Type": "application/json"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._timeout = aiohttp.ClientTimeout(total=retry.timeout_s)

    def __repr__(self) -> str:  # the headers hold the key: never show them
        return f"JudgeClient(url={self.url!r}, attempts={self.retry.attempts})"

    async def complete(
        self, request: Mapping[str, Any], worth_keeping: Callable[[JudgeReply], bool] = lambda _: True
    ) -> JudgeReply:
        """The judge's reply, or JudgeCallFailed with the reason of the last attempt. A throttled reply that
        says how long to wait is waited out without spending an attempt, up to ``MAX_THROTTLED_WAIT_S``.
        ``worth_keeping``: whether the cache may keep a reply (one with no verdict in it is asked again next time);
        a reply cut short or with no text never is."""
        cache = self.cache
        if cache is None:
            return await self._call(orjson.dumps(request))
        key = request_key(CACHED_REPLY_KIND, self.url, request)
        if (kept := _cached_reply(cache.get(key))) is not None:
            return kept
        reply = await self._call(orjson.dumps(request))
        if reply.text is not None and not reply.truncated and worth_keeping(reply):
            kept_reply = {"text": reply.text, "finish_reason": reply.finish_reason, "usage": reply.usage}
            cache.put(key, orjson.dumps(kept_reply))
        return reply

    async def _call(self, body: bytes) -> JudgeReply:
        attempts = self.retry.attempts
        attempt, waits = 1, ThrottleWaits()
        while True:
            try:
                return await self._limited_attempt(body)
            except _RetryableFailure as exc:
                wait_s = exc.wait_s if isinstance(exc, _Throttled) else None
                if wait_s is not None and waits.take(wait_s):
                    self.limit.pause(wait_s)  # every call waits, not only this one
                    continue
                if attempt == attempts:
                    suffix = f" (after {attempts} attempts)" if attempts > 1 else ""
                    raise JudgeCallFailed(self.redact(f"{exc}{suffix}")) from None
            await self._sleep(self.retry.delay(attempt - 1, self._rng))
            attempt += 1

    async def _limited_attempt(self, body: bytes) -> JudgeReply:
        async with self.limit.slot() as slot:
            try:
                reply = await self._attempt(body)
            except _Throttled:
                self.limit.throttled(slot)
                raise
        self.limit.succeeded()
        return reply

    async def _attempt(self, body: bytes) -> JudgeReply:
        try:
            async with self.session.post(self.url, data=body, headers=self._headers, timeout=self._timeout) as reply:
                payload = await reply.read()
                status = reply.status
                wait_s = asked_wait_s(status, reply.headers)
        except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError) as exc:
            raise _RetryableFailure(self.redact(_describe(exc))) from None
        except TimeoutError:
            raise _RetryableFailure(f"TimeoutError: no judge reply within {self.retry.timeout_s:g} s") from None
        except aiohttp.ClientError as exc:  # e.g. an invalid URL: the same on every attempt
            raise JudgeCallFailed(self.redact(_describe(exc))) from None
        if status >= 400:
            reason = self.redact(f"HTTP {status} from the judge: {_snippet(payload)}")
            if is_throttled(status, wait_s):
                raise _Throttled(reason, wait_s)
            if is_retryable_status(status):
                raise _RetryableFailure(reason)
            raise JudgeCallFailed(reason)
        try:
            reply_text = parse_chat_completion(payload)
        except ValueError as exc:
            raise JudgeCallFailed(self.redact(str(exc))) from None
        text = None if reply_text.text is None else self.redact(reply_text.text)
        return JudgeReply(text, reply_text.finish_reason, usage=reply_text.usage)
