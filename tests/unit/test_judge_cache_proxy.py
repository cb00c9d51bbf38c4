"""The judge-call cache's proxy in front of a model server: what it keeps, passes through, and marks as a hit."""

from __future__ import annotations

import socket
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from reverify_assets.judge_cache.proxy import build_proxy_app, cacheable_request, marked_hit
from reverify_assets.rows.routed_row import routed
from tests.support.scripted_judge import run

RESPONSE = {"id": "resp_1", "object": "response", "output": [], "metadata": None, "status": "completed"}


@pytest.mark.parametrize(
    ("method", "body", "kept"),
    [
        ("POST", b'{"input": "x", "model": "m"}', True),
        ("POST", b'{"input": "x", "stream": true}', False),  # a stream is not one body to keep
        ("POST", b'{"input": "x", "stream": false}', True),
        ("POST", b"[1, 2]", False),
        ("POST", b"not json", False),
        ("GET", b"", False),
    ],
)
def test_which_requests_the_cache_answers(method: str, body: bytes, kept: bool) -> None:
    assert (cacheable_request(method, body) is not None) is kept


@pytest.mark.parametrize(
    ("body", "metadata"),
    [
        (RESPONSE, {"reverify_judge_cache": "hit"}),
        (RESPONSE | {"metadata": {"trace": "t1"}}, {"trace": "t1", "reverify_judge_cache": "hit"}),
        ({"object": "chat.completion", "choices": []}, None),  # not a Responses API object: as it was
    ],
)
def test_a_hit_is_marked_in_a_responses_object(body: dict[str, Any], metadata: dict[str, str] | None) -> None:
    marked = orjson.loads(marked_hit(orjson.dumps(body)))
    assert marked.get("metadata") == metadata
    assert {name: value for name, value in marked.items() if name != "metadata"} == {
        name: value for name, value in body.items() if name != "metadata"
    }


def test_a_marked_reply_in_a_judge_evaluation_counts_as_a_cache_hit() -> None:
    evaluations = [{"response": orjson.loads(marked_hit(orjson.dumps(RESPONSE)))}, {"response": RESPONSE}]
    made = routed({"reward": 1.0, "judge_evaluations": evaluations})
    assert (made.judge_calls, made.judge_cache_hits) == (1, 1)


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def through_proxy(tmp_path: Path, upstream: Handler, calls: Callable[[TestClient], Awaitable[Any]]) -> Any:
    """``calls`` made through a proxy in front of ``upstream``, with a cache in ``tmp_path``."""

    async def scenario() -> Any:
        model = web.Application()
        model.router.add_route("*", "/{tail:.*}", upstream)
        async with TestServer(model) as model_server:
            target = str(model_server.make_url("")).rstrip("/")
            proxy = build_proxy_app('{"type": "openai_model"}', target, tmp_path / "cache.sqlite")
            async with TestClient(TestServer(proxy)) as client:
                return await calls(client)

    return run(scenario())


def counting(reply: Callable[[], web.Response]) -> tuple[Handler, list[tuple[str, str, bytes, str | None]]]:
    """A model server answering every request with a new ``reply()`` (an aiohttp response is sent only once)."""
    seen: list[tuple[str, str, bytes, str | None]] = []

    async def handle(request: web.Request) -> web.StreamResponse:
        seen.append((request.method, request.path_qs, await request.read(), request.headers.get("Authorization")))
        return reply()

    return handle, seen


def test_a_repeated_request_is_answered_from_the_cache(tmp_path: Path) -> None:
    upstream, seen = counting(lambda: web.json_response(RESPONSE))
    body = {"input": [{"role": "user", "content": "same?"}], "model": "judge"}

    async def calls(client: TestClient) -> list[dict[str, Any]]:
        answers = []
        for _ in range(2):
            reply = await client.post("/v1/responses", json=body, headers={"Authorization": "Bearer k"})
            assert reply.status == 200
            answers.append(await reply.json())
        return answers

    first, second = through_proxy(tmp_path, upstream, calls)
    assert len(seen) == 1 and seen[0][:2] == ("POST", "/v1/responses") and seen[0][3] == "Bearer k"
    assert first == RESPONSE and second == RESPONSE | {"metadata": {"reverify_judge_cache": "hit"}}
    # Another run, another port for the model server: the key is its identity, not its address.
    upstream, seen = counting(lambda: web.json_response(RESPONSE))
    [third] = through_proxy(tmp_path, upstream, lambda client: _post_json(client, "/v1/responses", body))
    assert seen == [] and third["metadata"] == {"reverify_judge_cache": "hit"}


async def _post_json(client: TestClient, path: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    reply = await client.post(path, json=body)
    return [await reply.json()]


@pytest.mark.parametrize(
    ("status", "text", "content_type"),
    [
        (503, '{"error": "overloaded"}', "application/json"),
        (401, '{"error": "bad key"}', "application/json"),
        (200, "<html>ok</html>", "text/html"),
        (200, '{"object": "response", "status": "incomplete", "output": []}', "application/json"),  # cut short
        (200, '{"choices": [{"finish_reason": "length", "message": {}}]}', "application/json"),
    ],
)
def test_what_is_not_a_json_success_passes_through_and_is_not_kept(
    tmp_path: Path, status: int, text: str, content_type: str
) -> None:
    upstream, seen = counting(lambda: web.Response(status=status, text=text, content_type=content_type))

    async def calls(client: TestClient) -> list[tuple[int, str]]:
        answers = []
        for _ in range(2):
            answer = await client.post("/v1/responses", json={"input": "x"})
            answers.append((answer.status, await answer.text()))
        return answers

    assert through_proxy(tmp_path, upstream, calls) == [(status, text)] * 2
    assert len(seen) == 2


def test_a_get_goes_to_the_model_server(tmp_path: Path) -> None:
    upstream, seen = counting(lambda: web.json_response({"data": []}))

    async def calls(client: TestClient) -> tuple[int, Any]:
        reply = await client.get("/v1/models?limit=1")
        return reply.status, await reply.json()

    assert through_proxy(tmp_path, upstream, calls) == (200, {"data": []})
    assert seen == [("GET", "/v1/models?limit=1", b"", None)]


def test_a_model_server_not_listening_is_a_retryable_error_naming_it(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{probe.getsockname()[1]}"

    async def scenario() -> tuple[int, str]:
        async with TestClient(TestServer(build_proxy_app("{}", dead, tmp_path / "cache.sqlite"))) as client:
            reply = await client.post("/v1/responses", json={"input": "x"})
            return reply.status, await reply.text()

    status, text = run(scenario())
    assert status == 502
    assert text.startswith(f"the judge-call cache's proxy could not reach {dead}: ClientConnectorError")
