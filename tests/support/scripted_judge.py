"""The ``equivalence_judge`` server in front of a scripted judge on loopback: replies to script, the server's
result, what the judge was sent, and the backoff waits (recorded, never slept)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from aiohttp import web
from aiohttp.test_utils import TestServer

from reverify_assets.servers.judge.config import EquivalenceJudgeConfig
from reverify_assets.servers.judge.server import EquivalenceJudgeServer
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
