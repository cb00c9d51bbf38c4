"""``verifier.server_metrics``: which servers run their own hooks, and their answers taken as the hooks' own.

The server here plays our bootstrap's ``/reverify_metrics`` routes with our reproduction of mcqa's hooks, on the rows
streamed to it: the accumulator that asks it must answer as one that has the hooks itself.
"""

from __future__ import annotations

import json
import math
import random
from typing import Any

import orjson
import pytest
from aiohttp import web

from reverify_assets.metrics import mcqa
from reverify_assets.metrics.accumulator import MetricsAccumulator
from reverify_assets.verifier.client import AggregateMetricsFailed
from reverify_assets.verifier.server_metrics import SEND_BYTES, RowsToServer, ServerHooks, server_hooks
from tests.support.loopback import LoopbackServer


class HooksServer(LoopbackServer):
    def __init__(self, hooks_reply: web.Response | None = None, compute_reply: web.Response | None = None) -> None:
        super().__init__()
        self.hooks_reply, self.compute_reply = hooks_reply, compute_reply
        self.calls: list[str] = []
        self.rows_received = 0

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/reverify_metrics", self._hooks)
        app.router.add_post("/reverify_metrics_compute", self._compute)
        app.router.add_post("/reverify_metrics_key_metrics", self._key_metrics)
        return app

    async def _hooks(self, _: web.Request) -> web.Response:
        return self.hooks_reply or web.json_response({"nemo_gym": "0.7.0", "overridden": ["compute_metrics"]})

    async def _compute(self, request: web.Request) -> web.Response:
        self.calls.append("compute")
        if self.compute_reply is not None:
            return self.compute_reply
        tasks: dict[int, list[dict[str, Any]]] = {}
        async for line in request.content:  # streamed: read a line at a time
            row = json.loads(line)
            self.rows_received += 1
            tasks.setdefault(row["_ng_task_index"], []).append(row)
        answer = {"compute_metrics": {**mcqa.compute_metrics([tasks[t] for t in sorted(tasks)]), "odd": math.nan}}
        return web.Response(text=json.dumps(answer), content_type="application/json")

    async def _key_metrics(self, request: web.Request) -> web.Response:
        self.calls.append("key_metrics")
        agent = json.loads(await request.read())
        answer = {"key_metrics": mcqa.get_key_metrics(agent), "agent_metrics": {**agent, "seen_by_key_hook": True}}
        return web.Response(text=json.dumps(answer), content_type="application/json")


def rows(tasks: int = 40, repeats: int = 4) -> list[dict[str, Any]]:
    rng = random.Random(7)
    return [
        {
            "_ng_task_index": task,
            "_ng_rollout_index": repeat,
            "reward": float(rng.random() < 0.5),
            "extracted_answer": rng.choice("ABCD"),
            **({"mask_sample": True} if rng.random() < 0.1 else {}),
        }
        for task in range(tasks)
        for repeat in range(repeats)
    ]


@pytest.mark.parametrize(
    ("reply", "overridden"),
    [
        (web.json_response({"nemo_gym": "0.7.0", "overridden": []}), frozenset()),
        (
            web.json_response({"nemo_gym": "0.7.0", "overridden": ["get_key_metrics", "compute_metrics", "other"]}),
            frozenset({"get_key_metrics", "compute_metrics"}),
        ),
        # NeMo Gym calls these two the other way round than we could: its own route answers.
        (web.json_response({"nemo_gym": "0.7.0", "overridden": ["compute_repeat_metrics", "get_key_metrics"]}), None),
        (web.json_response({"detail": "Not Found"}, status=404), None),  # its own /aggregate_metrics
        (web.Response(status=405), None),
    ],
)
def test_a_server_says_which_hooks_it_runs_or_is_asked_its_aggregate_metrics(
    reply: web.Response, overridden: frozenset[str] | None
) -> None:
    with HooksServer(reply) as server:
        hooks = server_hooks("rs", server.url)
    assert (hooks.overridden if hooks else None) == overridden


@pytest.mark.parametrize(
    "reply",
    [web.Response(status=500, text="boom"), web.json_response({"no": "list"}), web.Response(text="not json")],
)
def test_a_server_that_cannot_say_its_hooks_fails_the_metrics_naming_it(reply: web.Response) -> None:
    with HooksServer(reply) as server, pytest.raises(AggregateMetricsFailed) as caught:
        server_hooks("rs", server.url)
    assert caught.value.server == "rs"


def test_hooks_run_by_the_server_answer_as_the_hooks_run_here() -> None:
    scored = [row for row in rows() if not row.get("mask_sample")]
    with HooksServer() as server:
        hooks = ServerHooks("rs", server.url, frozenset({"compute_metrics", "get_key_metrics"}))
        streamed = RowsToServer(hooks)
        remote = hooks.accumulator(streamed)
        for row in rows():
            if not row.get("mask_sample"):  # as the group sends them
                streamed.add(orjson.dumps(row, option=orjson.OPT_APPEND_NEWLINE))
            remote.add(row)
        answer = remote.answer()
    here = MetricsAccumulator(compute_metrics=mcqa.compute_metrics, get_key_metrics=mcqa.get_key_metrics)
    for row in rows():
        here.add(row)
    expected = here.answer()
    assert server.calls == ["compute", "key_metrics"] and server.rows_received == len(scored)
    # What the server's hooks added, NaN included, and the agent metrics as its get_key_metrics left them.
    assert answer["agent_metrics"].pop("odd") is None and answer["agent_metrics"].pop("seen_by_key_hook") is True
    assert orjson.dumps(answer) == orjson.dumps(expected)


def test_rows_stream_in_chunks_of_a_megabyte_and_all_arrive() -> None:
    line = orjson.dumps({"_ng_task_index": 0, "_ng_rollout_index": 0, "reward": 1.0, "pad": "x" * 1000}) + b"\n"
    count = 3 * SEND_BYTES // len(line) + 7
    with HooksServer() as server:
        streamed = RowsToServer(ServerHooks("rs", server.url, frozenset({"compute_metrics"})))
        for _ in range(count):
            streamed.add(line)
        assert "compute_metrics" in streamed.answers()
    assert server.rows_received == count


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (
            web.Response(status=500, text="\"ValueError('this hook is broken')\""),
            "this hook is broken",
        ),
        (web.Response(text="not json"), "the reply is not JSON"),
        (web.json_response({"compute_metrics": [1]}), "compute_metrics gave list, not a dict"),
        (web.json_response({}), "no compute_metrics answer"),
    ],
)
def test_a_hook_the_server_fails_fails_the_metrics_with_its_reply(reply: web.Response, message: str) -> None:
    with HooksServer(compute_reply=reply) as server:
        hooks = ServerHooks("rs", server.url, frozenset({"compute_metrics"}))
        streamed = RowsToServer(hooks)
        remote = hooks.accumulator(streamed)
        for row in rows():
            streamed.add(orjson.dumps(row, option=orjson.OPT_APPEND_NEWLINE))
            remote.add(row)
        with pytest.raises(AggregateMetricsFailed) as caught:
            remote.answer()
    assert caught.value.server == "rs"
    assert message in str(caught.value)  # the server's reply, or what was wrong with it
