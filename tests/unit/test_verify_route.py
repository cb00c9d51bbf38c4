"""``/verify``: one row a request, as the client sends it to NeMo Gym's servers, retries included."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import orjson
import pytest
from aiohttp import web

from reverify_assets.servers.app import build_app
from reverify_assets.servers.protocol import BadVerifyRequest, ResourcesServer
from reverify_assets.verifier.client import Route, VerifierClient, VerifyOutcome
from tests.support.app_client import client_for, run


class ScriptedServer(ResourcesServer):
    """Each request's ``do`` picks the answer; ``flaky`` raises on its first attempt only."""

    def __init__(self) -> None:
        self.attempts: Counter[str] = Counter()

    async def verify(self, body: dict[str, Any]) -> dict[str, Any]:
        self.attempts[body["id"]] += 1
        match body["do"]:
            case "bad":
                raise BadVerifyRequest(f"row {body['id']} is malformed")
            case "boom":
                raise RuntimeError("grader crashed")
            case "flaky" if self.attempts[body["id"]] == 1:
                raise RuntimeError("first try fails")
            case "no_reward":
                return {"note": "forgot the reward"}
        return {"id": body["id"], "reward": 1.0}


def body(action: str) -> bytes:
    return orjson.dumps({"id": "r0", "do": action})


@pytest.mark.parametrize(
    ("action", "reward", "error", "attempts"),
    [
        ("ok", 1.0, None, 1),
        ("flaky", 1.0, None, 2),  # a 500 is retried
        ("bad", None, 'HTTP 422: {"detail":"row r0 is malformed"}', 1),  # the caller's fault: not retried
        ("boom", None, "HTTP 500: ", 3),
        ("no_reward", None, "the verify reply has no `reward`", 1),
    ],
)
def test_a_row_settles_as_its_verify_answer_says(action: str, reward: float, error: str | None, attempts: int) -> None:
    async def test() -> None:
        server = ScriptedServer()
        async with client_for(build_app(server)) as client:
            outcome = await client.verify(body(action))
        assert (outcome.result or {}).get("reward") == reward
        if error is None:
            assert outcome.error is None
        else:
            assert error in (outcome.error or "")
        assert server.attempts["r0"] == attempts

    run(test)


def test_a_server_without_our_batch_route_gets_one_verify_per_row() -> None:
    async def verify(request: web.Request) -> web.Response:
        return web.json_response({"reward": 0.0, **(await request.json())})

    app = web.Application()
    app.router.add_post("/verify", verify)

    async def test() -> None:
        async with client_for(app) as client:
            assert await client.route() == (Route.VERIFY, 1)
            assert await client.verify(body("ok")) == VerifyOutcome({"reward": 0.0, "id": "r0", "do": "ok"})

    run(test)


@pytest.mark.parametrize(("verify_waits", "most_at_once"), [(True, 4), (False, 1)])
def test_a_batch_runs_its_rows_concurrently_only_for_a_server_that_waits(verify_waits: bool, most_at_once: int) -> None:
    class CountingServer(ResourcesServer):
        def __init__(self) -> None:
            self.running = self.most_running = 0

        async def verify(self, body: dict[str, Any]) -> dict[str, Any]:
            self.running += 1
            self.most_running = max(self.most_running, self.running)
            await asyncio.sleep(0)
            self.running -= 1
            return {"reward": 1.0}

    server = CountingServer()
    server.verify_waits = verify_waits
    rows = [
        b'[%d,0,{"_ng_task_index":%d,"_ng_rollout_index":0},{"_ng_task_index":%d,"_ng_rollout_index":0,"response":{}}]'
        % (task, task, task)
        for task in range(4)
    ]

    async def test() -> None:
        async with client_for(build_app(server)) as client:
            outcomes = await client.reverify_batch(rows, b"null")
        assert all(outcome.routed is not None for outcome in outcomes)
        assert server.most_running == most_at_once

    run(test)


def nemo_gym_like(server: ScriptedServer, reach: dict[str, VerifierClient]) -> web.Application:
    """``/verify`` as NeMo Gym's middleware answers (an exception's ``repr`` as a JSON 500), and ``/verify_batch``
    as ``gym.server_bootstrap`` does: each line handed to that ``/verify`` (through ``reach["app"]``, a client
    of this app), its status and body as they came, a line each."""

    async def verify(request: web.Request) -> web.Response:
        row = await request.json()
        if row["do"] == "text":  # a reply that is not JSON (an HTTPException's, a proxy's)
            server.attempts[row["id"]] += 1
            return web.Response(text="no teapot here", status=418)
        try:
            return web.json_response(await server.verify(row))
        except BadVerifyRequest as exc:
            return web.json_response({"detail": str(exc)}, status=422)
        except Exception as exc:
            return web.json_response(repr(exc), status=500)

    async def limits(_: web.Request) -> web.Response:
        return web.json_response({"max_rows": 8})

    async def verify_batch(request: web.Request) -> web.Response:
        async def one(line: bytes) -> bytes:
            itself = reach["app"]
            async with itself.session.post(f"{itself.base_url}/verify", data=line) as reply:
                if reply.content_type == "application/json":
                    return b'{"status":%d,"body":%b}' % (reply.status, await reply.read())
                return b'{"status":%d,"text":%b}' % (reply.status, orjson.dumps(await reply.text()))

        lines = [line for line in (await request.read()).split(b"\n") if line]
        answers = await asyncio.gather(*(one(line) for line in lines))
        return web.Response(body=b"\n".join(answers) + b"\n", content_type="application/x-ndjson")

    app = web.Application()
    app.router.add_post("/verify", verify)
    app.router.add_get("/verify_batch", limits)
    app.router.add_post("/verify_batch", verify_batch)
    return app


def test_a_batch_settles_each_row_as_one_verify_a_row_would_retries_included() -> None:
    """Rows of every kind in one batch: each settles with the outcome and the attempts of its own ``/verify``."""
    actions = ["ok", "flaky", "bad", "boom", "no_reward", "text"]

    def bodies() -> list[bytes]:
        return [orjson.dumps({"id": f"r{n}", "do": action}) for n, action in enumerate(actions)]

    async def test() -> None:
        one_a_row, batched = ScriptedServer(), ScriptedServer()
        async with client_for(nemo_gym_like(one_a_row, {})) as client:
            singly = [await client.verify(row) for row in bodies()]
        reach: dict[str, VerifierClient] = {}
        async with client_for(nemo_gym_like(batched, reach)) as client:
            reach["app"] = client
            assert await client.route() == (Route.VERIFY_BATCH, 8)
            together = await client.verify_batch(bodies())
        assert together == singly
        assert batched.attempts == one_a_row.attempts == Counter({"r0": 1, "r1": 2, "r2": 1, "r3": 3, "r4": 1, "r5": 1})
        assert together[5].error == "HTTP 418: no teapot here"

    run(test)


@pytest.mark.parametrize(
    "reply",
    [
        b'{"status":200,"body":{"reward":1}}\n',
        b"not a line\nnot a line\n",
        b'{"status":200,"bod":{}}\n' * 2,
        b'{"status":500,"text":[1]}\n' * 2,
    ],
    ids=["a line short", "not lines of rows", "no body", "text not text"],
)
def test_a_malformed_batch_reply_fails_its_rows_and_says_why(reply: bytes) -> None:
    async def batch(_: web.Request) -> web.Response:
        return web.Response(body=reply)

    app = web.Application()
    app.router.add_post("/verify_batch", batch)

    async def test() -> None:
        async with client_for(app) as client:
            outcomes = await client.verify_batch([body("ok"), body("ok")])
        assert [outcome.result for outcome in outcomes] == [None, None]
        assert all("the verify_batch reply is malformed" in (outcome.error or "") for outcome in outcomes)

    run(test)


def test_a_server_gone_mid_batch_fails_each_row_after_its_attempts_and_loses_none() -> None:
    """The connection dropped under every batch (a killed server): each row is sent again, then fails alone."""
    calls = Counter[str]()

    async def batch(request: web.Request) -> web.Response:
        calls["batches"] += 1
        assert request.transport is not None
        request.transport.close()  # as a server killed while it grades
        raise ConnectionResetError("gone")

    app = web.Application()
    app.router.add_post("/verify_batch", batch)

    async def test() -> None:
        async with client_for(app) as client:
            outcomes = await client.verify_batch([body("ok"), body("flaky"), body("bad")])
        assert len(outcomes) == 3 and all(outcome.result is None for outcome in outcomes)
        assert all((outcome.error or "").endswith("(after 3 attempts)") for outcome in outcomes), outcomes
        assert calls["batches"] == 3

    run(test)


@pytest.mark.parametrize("refusal", [404, 413])
def test_a_batch_route_that_is_refused_sends_its_rows_one_verify_each(refusal: int) -> None:
    """A server restarted without the route, or a proxy with a body limit: the rows go one /verify each."""
    server = ScriptedServer()

    async def refused(_: web.Request) -> web.Response:
        return web.Response(status=refusal)

    async def verify(request: web.Request) -> web.Response:
        return web.json_response(await server.verify(await request.json()))

    app = web.Application()
    app.router.add_post("/verify_batch", refused)
    app.router.add_post("/verify", verify)

    async def test() -> None:
        async with client_for(app) as client:
            outcomes = await client.verify_batch([body("ok"), orjson.dumps({"id": "r1", "do": "ok"})])
        assert [outcome.result for outcome in outcomes] == [{"id": "r0", "reward": 1.0}, {"id": "r1", "reward": 1.0}]
        assert server.attempts == Counter({"r0": 1, "r1": 1})

    run(test)
