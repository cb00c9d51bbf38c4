"""NeMo Gym's resources-server protocol on our side: the server interface, and what every route shares.

``app.build_app`` serves a ``ResourcesServer`` over HTTP with these pieces.
"""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar, TypeVar

import orjson
from aiohttp import web

from reverify_assets.metrics.accumulator import KeyMetricsHook, MetricsAccumulator
from reverify_assets.metrics.aggregate import aggregate_metrics
from reverify_assets.metrics.hooks import TasksHook

log = logging.getLogger("reverify.server")
T = TypeVar("T")

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
    # Whether ``verify`` waits (on a judge, say), so that the rows of a batch are best verified concurrently,
    # as separate /verify requests would be. A server that only computes gains nothing from that and pays
    # for a task per row: about a seventh of mcqa's time a row.
    verify_waits: ClassVar[bool] = True
    # Whether it asks a judge model, and so takes the judge-call cache its host hands it (``judge_cache=``).
    calls_a_judge: ClassVar[bool] = False

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


async def each_row(server: ResourcesServer, rows: Iterable[Awaitable[T]]) -> list[T]:
    """The rows' results in order: concurrently if the server's ``verify`` waits, else one after another."""
    if server.verify_waits:
        return list(await asyncio.gather(*rows))
    return [await row for row in rows]
