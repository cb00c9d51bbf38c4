"""NeMo Gym's resources-server HTTP protocol as an aiohttp app around any ``ResourcesServer``.

Besides NeMo Gym's routes, built-in servers advertise a batch route, ``/verify_batch``: at a few
thousand rows a second, one HTTP exchange per row costs both sides more than grading the row.

* ``GET /verify_batch`` answers ``{"max_rows": N}``; a server without the route answers 404, and
  clients then send one row per ``/verify``.
* ``POST /verify_batch`` takes ``{"requests": [<verify body>, ...]}`` (at most N) and answers
  ``{"results": [...]}`` in the same order, each ``{"status": 200, "response": <verify answer>}`` or
  ``{"status": 422 | 500, "detail": "..."}``: exactly what ``/verify`` would have answered that row.
  The rows are verified concurrently, as separate ``/verify`` requests would be.
"""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar

import orjson
from aiohttp import web

from reverify_assets.metrics.accumulator import KeyMetricsHook, MetricsAccumulator
from reverify_assets.metrics.aggregate import aggregate_metrics
from reverify_assets.metrics.hooks import TasksHook

log = logging.getLogger("reverify.server")

# Enough rows per exchange that HTTP costs vanish next to grading, few enough that a batch of judge calls
# still finishes well inside one request timeout.
MAX_BATCH_ROWS = 256


class ReverifyMode(StrEnum):
    STATELESS = "stateless"  # re-verifying a stored response needs no per-rollout state: safe
    UNSUPPORTED = "unsupported"
    UNKNOWN = "unknown"


class BadVerifyRequest(Exception):
    """The request is the caller's fault: answered with HTTP 422, as NeMo Gym's FastAPI validation does."""


@dataclass(frozen=True)
class MetricsHooks:
    """A server's ``/aggregate_metrics`` hooks, NeMo Gym's ``compute_metrics`` and ``get_key_metrics``; a
    class-level fact, so the CLI can compute a built-in server's metrics without starting it."""

    compute_metrics: TasksHook | None = None
    get_key_metrics: KeyMetricsHook | None = None

    def accumulator(self) -> MetricsAccumulator:
        return MetricsAccumulator(compute_metrics=self.compute_metrics, get_key_metrics=self.get_key_metrics)

    def answer(self, verify_responses: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        return aggregate_metrics(
            verify_responses, compute_metrics=self.compute_metrics, get_key_metrics=self.get_key_metrics
        )


class ResourcesServer(ABC):
    reverify_mode: ClassVar[ReverifyMode] = ReverifyMode.UNKNOWN
    metrics_hooks: ClassVar[MetricsHooks] = MetricsHooks()

    @abstractmethod
    async def verify(self, body: dict[str, Any]) -> dict[str, Any]: ...

    async def open(self) -> None:  # noqa: B027 - a hook: most servers need nothing here
        """Acquire what verification needs (an HTTP session to a judge, say) once the server runs."""

    async def close(self) -> None:  # noqa: B027 - a hook, like open
        """Release what ``open`` acquired."""

    def aggregate_metrics(self, verify_responses: list[dict[str, Any]]) -> dict[str, Any]:
        return self.metrics_hooks.answer(verify_responses)


def json_response(value: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(value), status=status, content_type="application/json")


async def read_json_object(request: web.Request) -> dict[str, Any]:
    try:
        body = orjson.loads(await request.read())
    except orjson.JSONDecodeError as exc:
        raise web.HTTPBadRequest(text=f"request body is not JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise web.HTTPUnprocessableEntity(text="request body must be a JSON object")
    return body


async def verify_one(server: ResourcesServer, body: Any) -> dict[str, Any]:
    """One row of a batch, as ``/verify`` would have answered it."""
    if not isinstance(body, dict):
        return {"status": 422, "detail": "each request must be a JSON object"}
    try:
        return {"status": 200, "response": await server.verify(body)}
    except BadVerifyRequest as exc:
        return {"status": 422, "detail": str(exc)}
    except Exception as exc:  # one broken row must not fail its batch-mates; /verify would answer 500
        log.exception("verify failed")
        return {"status": 500, "detail": f"{type(exc).__name__}: {exc}"}


def build_app(server: ResourcesServer) -> web.Application:
    async def verify(request: web.Request) -> web.Response:
        body = await read_json_object(request)
        try:
            return json_response(await server.verify(body))
        except BadVerifyRequest as exc:
            return json_response({"detail": str(exc)}, status=422)

    async def batch_limits(_: web.Request) -> web.Response:
        return json_response({"max_rows": MAX_BATCH_ROWS})

    async def verify_batch(request: web.Request) -> web.Response:
        body = await read_json_object(request)
        requests = body.get("requests")
        if not isinstance(requests, list):
            return json_response({"detail": "`requests` must be a list of verify requests"}, status=422)
        if len(requests) > MAX_BATCH_ROWS:
            return json_response({"detail": f"at most {MAX_BATCH_ROWS} requests per batch"}, status=413)
        results = await asyncio.gather(*(verify_one(server, row) for row in requests))
        return json_response({"results": results})

    async def reverify_mode(_: web.Request) -> web.Response:
        return json_response(server.reverify_mode.value)

    async def aggregate_metrics(request: web.Request) -> web.Response:
        body = await read_json_object(request)
        rows = body.get("verify_responses")
        if not isinstance(rows, list) or not all(isinstance(row, Mapping) for row in rows):
            return json_response({"detail": "`verify_responses` must be a list of objects"}, status=422)
        return json_response(server.aggregate_metrics(rows))

    # Aggregation bodies hold every row of a run; the default 1 MiB cap would refuse them.
    app = web.Application(client_max_size=1 << 34)

    async def open_server(_: web.Application) -> None:
        await server.open()

    async def close_server(_: web.Application) -> None:
        await server.close()

    app.on_startup.append(open_server)
    app.on_cleanup.append(close_server)
    app.router.add_post("/verify", verify)
    app.router.add_get("/verify_batch", batch_limits)
    app.router.add_post("/verify_batch", verify_batch)
    app.router.add_get("/reverify_mode", reverify_mode)
    app.router.add_post("/aggregate_metrics", aggregate_metrics)
    return app
