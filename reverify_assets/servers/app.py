"""The aiohttp app around any ``ResourcesServer``: NeMo Gym's routes, and two batch routes of our own.

Besides NeMo Gym's routes, built-in servers advertise a batch route, ``/verify_batch``: at a few
thousand rows a second, one HTTP exchange per row costs both sides more than grading the row.

* ``GET /verify_batch`` answers ``{"max_rows": N}``; a server without the route answers 404, and
  clients then send one row per ``/verify``.
* ``POST /verify_batch`` takes ``{"requests": [<verify body>, ...]}`` (at most N) and answers
  ``{"results": [...]}`` in the same order, each ``{"status": 200, "response": <verify answer>}`` or
  ``{"status": 422 | 500, "detail": "..."}``: exactly what ``/verify`` would have answered that row.
  A server whose ``verify`` waits (a judge) verifies the rows concurrently, as separate ``/verify``
  requests would be; one that only computes, one after another (``ResourcesServer.verify_waits``).
* ``/reverify_batch``: stored rows in, lines to store out (see ``stored_rows``).
"""

from __future__ import annotations

from collections.abc import Mapping

from aiohttp import web

from reverify_assets.servers.protocol import (
    MAX_BATCH_ROWS,
    BadVerifyRequest,
    ResourcesServer,
    each_row,
    json_response,
    read_json_object,
    verify_one,
)
from reverify_assets.servers.stored_rows import add_stored_rows_routes


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
        results = await each_row(server, (verify_one(server, row) for row in requests))
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
    add_stored_rows_routes(app, server)
    return app
