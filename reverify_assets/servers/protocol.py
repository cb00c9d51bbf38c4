"""NeMo Gym's resources-server HTTP protocol as an aiohttp app around any ``ResourcesServer``."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from enum import StrEnum
from typing import Any, ClassVar

import orjson
from aiohttp import web

from reverify_assets.metrics.aggregate import baseline_metrics


class ReverifyMode(StrEnum):
    STATELESS = "stateless"  # re-verifying a stored response needs no per-rollout state: safe
    UNSUPPORTED = "unsupported"
    UNKNOWN = "unknown"


class BadVerifyRequest(Exception):
    """The request is the caller's fault: answered with HTTP 422, as NeMo Gym's FastAPI validation does."""


class ResourcesServer(ABC):
    reverify_mode: ClassVar[ReverifyMode] = ReverifyMode.UNKNOWN

    @abstractmethod
    async def verify(self, body: dict[str, Any]) -> dict[str, Any]: ...

    async def open(self) -> None:  # noqa: B027 - a hook: most servers need nothing here
        """Acquire what verification needs (an HTTP session to a judge, say) once the server runs."""

    async def close(self) -> None:  # noqa: B027 - a hook, like open
        """Release what ``open`` acquired."""

    def aggregate_metrics(self, verify_responses: list[dict[str, Any]]) -> dict[str, Any]:
        return baseline_metrics(verify_responses)


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


def build_app(server: ResourcesServer) -> web.Application:
    async def verify(request: web.Request) -> web.Response:
        body = await read_json_object(request)
        try:
            return json_response(await server.verify(body))
        except BadVerifyRequest as exc:
            return json_response({"detail": str(exc)}, status=422)

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
    app.router.add_get("/reverify_mode", reverify_mode)
    app.router.add_post("/aggregate_metrics", aggregate_metrics)
    return app
