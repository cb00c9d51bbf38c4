"""``/verify_batch`` inside one of NeMo Gym's resources servers: many ``/verify`` requests in one HTTP request.

Run by the server's own Python in place of its entrypoint (``python verify_batch_route.py app.py``): it adds the
route to the app ``SimpleResourcesServer.setup_webserver`` builds, then runs ``app.py`` as ``__main__``, as
``gym env start`` would have. NeMo Gym's files are not touched. This file is never imported by ``reverify_assets``:
it may use only what the server's Python has, the standard library, FastAPI (with Starlette) and pydantic.

Through HTTP, about four fifths of such a server's CPU a row is uvicorn, FastAPI's request handling and NeMo
Gym's middleware. Here each row is handed to the ``/verify`` route's own FastAPI handler (the request model
``verify`` declares validated, the same callable, ``judge_failsafe`` and the tracing included, the response
serialised by the route's response model) through a request made in memory, and an exception becomes the reply
the app's own exception handlers (a 422, an ``HTTPException``) or else NeMo Gym's exception middleware would have
made of it. So every row's status and body are byte for byte what
``/verify`` answers, without a connection, headers or middleware per row.

* ``GET /verify_batch`` answers ``{"max_rows": N}``; 404 where the route could not be added (a server whose
  ``verify`` takes the HTTP request or its session), and the client then sends one ``/verify`` a row.
* ``POST /verify_batch`` takes NDJSON, one ``/verify`` body a line (at most N), and answers NDJSON, one line a
  row in order: ``{"status": S, "body": B}``, B being ``/verify``'s JSON reply as it would have sent it, or
  ``{"status": S, "text": T}`` for a reply that is not JSON, T its text as a JSON string.
  The rows of a batch run concurrently, as they would have in as many requests.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import runpy
import sys
from contextlib import AsyncExitStack
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException

MAX_ROWS = 256
NDJSON = "application/x-ndjson"


def _verify_route(app: FastAPI) -> APIRoute | None:
    for route in app.routes:
        if isinstance(route, APIRoute) and route.path == "/verify" and "POST" in route.methods:
            return route
    return None


def _batchable(server: Any) -> bool:
    """A ``verify`` that takes the HTTP request (for its session, headers, cookies) needs a real one."""
    parameters = inspect.signature(server.verify).parameters.values()
    return not any(parameter.annotation in (Request, "Request") for parameter in parameters) and not any(
        parameter.name == "request" for parameter in parameters
    )


def _app_handler(app: FastAPI, exc: Exception) -> Any:
    """The app's own handler of ``exc``, as Starlette's exception middleware (inside NeMo Gym's) picks it: by an
    HTTPException's status, else by the exception's class. Handlers of ``Exception`` itself run outside NeMo
    Gym's middleware, which answers first."""
    handlers = app.exception_handlers
    if isinstance(exc, HTTPException) and exc.status_code in handlers:
        return handlers[exc.status_code]
    for kind in type(exc).__mro__:
        if kind is Exception:
            return None
        if kind in handlers:
            return handlers[kind]
    return None


def add_verify_batch(app: FastAPI, server: Any) -> None:
    route = _verify_route(app)
    if route is None or not _batchable(server):
        return
    handle = route.get_route_handler()

    def failed(exc: Exception) -> Response:
        """What NeMo Gym's exception middleware (``setup_exception_middleware``) answers for ``exc``."""
        from aiohttp import ClientResponseError  # NeMo Gym's HTTP client, as its middleware imports it

        if isinstance(exc, ClientResponseError):
            content = (
                f"Hit an exception in {server.get_session_middleware_key()} calling an inner server: "
                f"{getattr(exc, 'response_content', exc)}"
            )
            return JSONResponse(content=content, status_code=500)
        return JSONResponse(content=repr(exc), status_code=500)

    async def one(body: bytes) -> bytes:
        scope = {
            "type": "http",
            "method": "POST",
            "path": "/verify",
            "raw_path": b"/verify",
            "root_path": "",
            "query_string": b"",
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
            "app": app,
        }
        sent = False

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if sent:
                return {"type": "http.disconnect"}
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        # The exit stacks FastAPI's router and middleware give each request (files, dependencies, the function's).
        async with AsyncExitStack() as outer, AsyncExitStack() as inner, AsyncExitStack() as function:
            scope["fastapi_middleware_astack"], scope["fastapi_inner_astack"] = outer, inner
            scope["fastapi_function_astack"] = function
            request = Request(scope, receive)
            try:
                response = await handle(request)
            except Exception as exc:  # the other rows go on, as other requests would
                if (answer := _app_handler(app, exc)) is not None:  # a 422, an HTTPException's status and detail
                    response = answer(request, exc)
                    if inspect.isawaitable(response):
                        response = await response
                else:  # what NeMo Gym's exception middleware makes of it
                    response = failed(exc)
        if (response.media_type or "").startswith("application/json"):
            return b'{"status":%d,"body":%b}' % (response.status_code, response.body)
        text = json.dumps(response.body.decode(errors="replace")).encode()  # the client takes it back as text
        return b'{"status":%d,"text":%b}' % (response.status_code, text)

    async def limits() -> dict[str, int]:
        return {"max_rows": MAX_ROWS}

    async def verify_batch(request: Request) -> Response:
        rows = [line for line in (await request.body()).split(b"\n") if line.strip()]
        if len(rows) > MAX_ROWS:
            return JSONResponse({"detail": f"at most {MAX_ROWS} rows per batch"}, status_code=413)
        answers = await asyncio.gather(*(one(row) for row in rows))
        return Response(b"\n".join(answers) + b"\n", media_type=NDJSON)

    app.get("/verify_batch")(limits)
    app.post("/verify_batch")(verify_batch)


def main() -> None:
    from nemo_gym.base_resources_server import SimpleResourcesServer

    setup = SimpleResourcesServer.setup_webserver

    def setup_webserver(self: SimpleResourcesServer) -> FastAPI:
        app = setup(self)
        add_verify_batch(app, self)
        return app

    SimpleResourcesServer.setup_webserver = setup_webserver  # type: ignore[method-assign]
    entrypoint = sys.argv[1]
    sys.argv = [entrypoint, *sys.argv[2:]]
    # As `python app.py` would have it: the server's folder first, not this file's (whose modules it could
    # import by mistake).
    sys.path[0] = os.path.dirname(os.path.abspath(entrypoint))
    runpy.run_path(entrypoint, run_name="__main__")


if __name__ == "__main__":
    main()
