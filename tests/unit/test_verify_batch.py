"""``/verify_batch``: the built-in servers' batch route, and the client that uses it or falls back to ``/verify``."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import orjson
import pytest
from aiohttp import web

from reverify_assets.servers.app import build_app
from reverify_assets.servers.protocol import MAX_BATCH_ROWS, BadVerifyRequest, ResourcesServer
from reverify_assets.verifier.client import VerifyOutcome
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


def bodies(*actions: str) -> list[bytes]:
    return [orjson.dumps({"id": f"r{index}", "do": action}) for index, action in enumerate(actions)]


@pytest.mark.parametrize(
    ("action", "reward", "error"),
    [
        ("ok", 1.0, None),
        ("flaky", 1.0, None),  # a 500 for one row is retried for that row alone
        ("bad", None, 'HTTP 422: "row r1 is malformed"'),
        ("boom", None, 'HTTP 500: "RuntimeError: grader crashed" (after 3 attempts)'),
        ("no_reward", None, "the verify reply has no `reward`"),
    ],
)
def test_each_row_of_a_batch_settles_as_verify_would_settle_it(action: str, reward: float, error: str | None) -> None:
    async def test() -> None:
        server = ScriptedServer()
        async with client_for(build_app(server)) as client:
            assert await client.batch_limit() == MAX_BATCH_ROWS
            outcomes = await client.verify_batch(bodies("ok", action, "ok"))
        assert [outcome.result is not None for outcome in (outcomes[0], outcomes[2])] == [True, True]
        middle = outcomes[1]
        assert (middle.result or {}).get("reward") == reward
        if error is None:
            assert middle.error is None
        else:
            assert error in (middle.error or "")
        assert server.attempts["r0"] == 1 and server.attempts["r2"] == 1, "settled rows are never sent again"

    run(test)


def test_oversized_and_malformed_batches_are_refused_whole() -> None:
    async def test() -> None:
        async with client_for(build_app(ScriptedServer())) as client:
            too_many = await client.verify_batch(bodies(*["ok"] * (MAX_BATCH_ROWS + 1)))
            assert {outcome.error for outcome in too_many} == {
                f'HTTP 413: {{"detail":"at most {MAX_BATCH_ROWS} requests per batch"}}'
            }
            async with client.session.post(f"{client.base_url}/verify_batch", data=b'{"requests": 3}') as reply:
                assert reply.status == 422

    run(test)


def test_a_server_without_the_batch_routes_gets_one_verify_per_row() -> None:
    async def verify(request: web.Request) -> web.Response:
        return web.json_response({"reward": 0.0, **(await request.json())})

    app = web.Application()
    app.router.add_post("/verify", verify)

    async def test() -> None:
        async with client_for(app) as client:
            assert await client.batch_limit() == 1
            assert await client.stored_rows_limit() == 0
            assert await client.verify(bodies("ok")[0]) == VerifyOutcome({"reward": 0.0, "id": "r0", "do": "ok"})

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
            return {"id": body["id"], "reward": 1.0}

    server = CountingServer()
    server.verify_waits = verify_waits

    async def test() -> None:
        async with client_for(build_app(server)) as client:
            outcomes = await client.verify_batch(bodies("ok", "ok", "ok", "ok"))
        assert [(outcome.result or {}).get("id") for outcome in outcomes] == ["r0", "r1", "r2", "r3"]
        assert server.most_running == most_at_once

    run(test)
