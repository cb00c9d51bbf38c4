"""A small NeMo-Gym-compatible resources server for tests, whose behaviour each row chooses.

A row's ``behaviour`` field (carried in its materialized input) picks the answer: ``ok``
(reward 1.0), ``wrong`` (0.0), ``judge_failed`` (NeMo Gym's 200 failsafe row), ``no_persist``,
``http422``, ``http500`` (always), ``flaky`` (500 on the first try of each key, then ok),
``judge`` (while ``judge_down`` is set, the judge-failure row; else reward 1.0 on even tasks, 0.0 on odd),
``stateful`` (1.0 the first time this server sees a key, 0.0 after: a server that keeps state across requests).
A judge-failure row's ``_ng_failure_judge_error`` is ``judge_error``. ``/aggregate_metrics`` answers 503 with
``aggregate_error`` to its first ``aggregate_failures`` calls (``math.inf``: to every one).
It counts calls and the most requests it ever had in flight.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

from tests.support.loopback import LoopbackServer


@dataclass
class FakeStats:
    verify_calls: int = 0
    in_flight: int = 0
    max_in_flight: int = 0
    aggregate_calls: int = 0
    attempts_by_key: Counter[tuple[int, int]] = field(default_factory=Counter)


class FakeVerifier(LoopbackServer):
    def __init__(
        self,
        *,
        reverify_mode: str = "stateless",
        latency_s: float = 0.0,
        aggregate: bool = True,
        aggregate_failures: float = 0,
    ) -> None:
        super().__init__()
        self.reverify_mode = reverify_mode
        self.latency_s = latency_s
        self.aggregate = aggregate
        self.aggregate_failures = aggregate_failures  # may be changed while serving: the server "comes back"
        self.judge_down = False
        self.judge_error = "RuntimeError: judge 401"
        self.aggregate_error = "aggregation unavailable: the server is restarting"
        self.stats = FakeStats()

    def app(self) -> web.Application:
        app = web.Application(client_max_size=1 << 30)
        app.router.add_post("/verify", self._verify)
        app.router.add_get("/reverify_mode", self._mode)
        if self.aggregate:
            app.router.add_post("/aggregate_metrics", self._aggregate)
        return app

    async def _mode(self, _: web.Request) -> web.Response:
        return web.json_response(self.reverify_mode)

    async def _verify(self, request: web.Request) -> web.Response:
        body = orjson.loads(await request.read())
        key = (body["_ng_task_index"], body["_ng_rollout_index"])
        stats = self.stats
        stats.verify_calls += 1
        stats.attempts_by_key[key] += 1
        stats.in_flight += 1
        stats.max_in_flight = max(stats.max_in_flight, stats.in_flight)
        try:
            if self.latency_s:
                await asyncio.sleep(self.latency_s)
            return self._answer(body, key)
        finally:
            stats.in_flight -= 1

    def _answer(self, body: dict[str, Any], key: tuple[int, int]) -> web.Response:
        behaviour = body.get("behaviour", "ok")
        if behaviour == "http422":
            return web.json_response({"detail": "grading_mode 'nope' is not valid"}, status=422)
        if behaviour == "http500" or (behaviour == "flaky" and self.stats.attempts_by_key[key] == 1):
            return web.Response(status=500, text="internal error")
        result: dict[str, Any] = {
            "responses_create_params": body.get("responses_create_params"),
            "response": body["response"],
            "reward": 0.0 if behaviour == "wrong" else 1.0,
            "extracted_answer": "A",
        }
        if behaviour == "stateful":
            result["reward"] = 1.0 if self.stats.attempts_by_key[key] == 1 else 0.0
        if behaviour == "judge" and not self.judge_down:
            result["reward"] = 1.0 if key[0] % 2 == 0 else 0.0
        if behaviour == "judge_failed" or (behaviour == "judge" and self.judge_down):
            result = {
                **body,
                "reward": 0.0,
                "mask_sample": True,
                "failure_kind": "judge_failed",
                "_ng_failure_class": "judge_failed",
                "_ng_failure_judge_error": self.judge_error,
            }
        elif behaviour == "no_persist":
            result["_ng_no_persist"] = True
        return web.json_response(result)

    async def _aggregate(self, request: web.Request) -> web.Response:
        self.stats.aggregate_calls += 1
        body = await request.read()
        if self.stats.aggregate_calls <= self.aggregate_failures:
            return web.Response(status=503, text=self.aggregate_error)
        rows = orjson.loads(body)["verify_responses"]
        mean = sum(r["reward"] for r in rows) / len(rows)
        return web.json_response(
            {
                "agent_metrics": {"mean/reward": mean, "rows_seen": len(rows)},
                "key_metrics": {"mean/reward": mean},
                "group_level_metrics": [],
            }
        )
