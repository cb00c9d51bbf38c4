"""The aiohttp app around any ``ResourcesServer``: NeMo Gym's routes, and a batch route of our own.

Besides NeMo Gym's routes, built-in servers take ``/reverify_batch``: stored rows in, lines to store out (see
``stored_rows``). At a few thousand rows a second, one HTTP exchange per row costs both sides more than grading
the row. A client of a server without it (NeMo Gym's) sends one ``/verify`` per row.
"""

from __future__ import annotations

from collections.abc import Mapping

from aiohttp import web

from reverify_assets.servers.protocol import (
    BadVerifyRequest,
    ResourcesServer,
    json_response,
    read_json_object,
)
from reverify_assets.servers.stored_rows import add_stored_rows_routes


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
    add_stored_rows_routes(app, server)
    return app
