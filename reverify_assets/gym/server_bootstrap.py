"""What reverify adds to one of NeMo Gym's resources servers: ``/verify_batch`` and ``/reverify_metrics``.

Run by the server's own Python in place of its entrypoint (``python server_bootstrap.py app.py``): it adds the
routes to the app ``SimpleResourcesServer.setup_webserver`` builds, then runs ``app.py`` as ``__main__``, as
``gym env start`` would have. NeMo Gym's files are not touched. This file is never imported by ``reverify_assets``:
it may use only what the server's Python has, the standard library, FastAPI (with Starlette), pydantic and NeMo Gym.

``/verify_batch``: many ``/verify`` requests in one HTTP request. Through HTTP, about four fifths of such a server's
CPU a row is uvicorn, FastAPI's request handling and NeMo Gym's middleware. Here each row is handed to the
``/verify`` route's own FastAPI handler (the request model ``verify`` declares validated, the same callable,
``judge_failsafe`` and the tracing included, the response serialised by the route's response model) through a
request made in memory, and an exception becomes the reply the app's own exception handlers (a 422, an
``HTTPException``) or else NeMo Gym's exception middleware would have made of it. So every row's status and body
are byte for byte what ``/verify`` answers, without a connection, headers or middleware per row.

* ``GET /verify_batch`` answers ``{"max_rows": N}``; 404 when the app's ``/verify`` (looked up at each request: a
  server may replace it after its setup) takes what a request made in memory cannot give, the HTTP request
  (for its session, headers, cookies), the response or background tasks: the client then sends one ``/verify``
  a row. So does every worker of a server with ``num_workers`` above 1, which uvicorn starts afresh from
  ``app.py``, without these routes.
* ``POST /verify_batch`` takes NDJSON, one ``/verify`` body a line (at most N), and answers NDJSON, one line a
  row in order: ``{"status": S, "body": B}``, B being ``/verify``'s JSON reply as it would have sent it, or
  ``{"status": S, "text": T}`` for a reply that is not JSON, T its text as a JSON string.
  The rows of a batch run concurrently, as they would have in as many requests.

``/reverify_metrics``: the server's own metrics hooks, without NeMo Gym's metrics maths. ``/aggregate_metrics``
spends nearly all its time in NeMo Gym's reward profile (about 6 s of CPU for 10,000 rows here), which the CLI
computes bit for bit as the rows stream past; what only the server can compute is what its hooks
(``compute_metrics``, ``compute_repeat_metrics``, ``get_key_metrics``) make of the rows, a tenth of a second for
mcqa. So the CLI asks for just that, each hook called as ``compute_aggregate_metrics`` calls it.

* ``GET /reverify_metrics`` answers ``{"nemo_gym": version, "overridden": [hook, ...]}``, the hooks this server's
  class overrides; 404 when the server answers ``/aggregate_metrics`` with code of its own (it overrides
  ``aggregate_metrics``, or replaced the route) or its NeMo Gym is not 0.7.0, whose maths the CLI reproduces: the
  CLI then posts every row there, as NeMo Gym does.
* ``POST /reverify_metrics_compute`` takes the rows ``/aggregate_metrics`` would have been posted, NDJSON, streamed
  as the CLI reads them, and answers ``{"compute_metrics": A, "compute_repeat_metrics": [[R, A], ...]}`` for the
  hooks the server overrides, each run on the scored rows grouped by task (one repeat's, R, for the second).
* ``POST /reverify_metrics_key_metrics`` takes the agent metrics and answers ``{"key_metrics": K,
  "agent_metrics": M}``, M as the hook left them.

Answers are JSON with NaN and infinities as Python writes them: the CLI takes a hook's values back as they were.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import runpy
import sys
from contextlib import AsyncExitStack
from traceback import format_exc, print_exc
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect

MAX_ROWS = 256
NDJSON = "application/x-ndjson"


def _verify_route(app: FastAPI) -> APIRoute | None:
    for route in app.routes:
        if isinstance(route, APIRoute) and route.path == "/verify" and "POST" in route.methods:
            return route
    return None


def _needs_the_connection(dependant: Any) -> bool:
    """Whether the endpoint, or any of its dependencies, takes the HTTP request, its connection or session, the
    response, background tasks or security scopes: a request made in memory cannot give them."""
    taken = (
        dependant.request_param_name,
        dependant.websocket_param_name,
        dependant.http_connection_param_name,
        dependant.response_param_name,
        dependant.background_tasks_param_name,
        dependant.security_scopes_param_name,
    )
    return any(name is not None for name in taken) or any(_needs_the_connection(d) for d in dependant.dependencies)


def _batchable_verify(app: FastAPI) -> APIRoute | None:
    """The app's ``/verify`` route as it is now (a server may replace it after our setup ran), if a batch can
    give it what it takes."""
    route = _verify_route(app)
    return route if route is not None and not _needs_the_connection(route.dependant) else None


def _app_handler(app: FastAPI, exc: BaseException) -> Any:
    """The app's own handler of ``exc``, as Starlette's exception middleware (inside NeMo Gym's) picks it: by an
    HTTPException's status, else by the exception's class. Handlers of ``Exception`` and of status 500 run in
    Starlette's outermost middleware, outside NeMo Gym's, which answers first."""
    handlers = app.exception_handlers
    if isinstance(exc, HTTPException) and exc.status_code != 500 and exc.status_code in handlers:
        return handlers[exc.status_code]
    for kind in type(exc).__mro__:
        if kind is Exception or kind is BaseException:
            return None
        if kind in handlers:
            return handlers[kind]
    return None


def _nemo_gym_answer(server: Any, exc: BaseException) -> Response:
    """What NeMo Gym's exception middleware (``setup_exception_middleware``) answers, and prints, for ``exc``."""
    from aiohttp import ClientResponseError  # NeMo Gym's HTTP client, as its middleware imports it

    if isinstance(exc, ClientResponseError) and hasattr(exc, "response_content"):
        content = (
            f"Hit an exception in {server.get_session_middleware_key()} calling an inner server: {exc.response_content}"
        )
        return JSONResponse(content=content, status_code=500)
    if isinstance(exc, asyncio.CancelledError):
        return JSONResponse(content="Request was cancelled", status_code=500)
    if isinstance(exc, Exception):
        print(f"Caught an exception in {server.config.name} (one row of /verify_batch): {format_exc()}", flush=True)
        return JSONResponse(content=repr(exc), status_code=500)
    print_exc()
    return JSONResponse(content="An unknown error occurred", status_code=500)


async def _line(response: Response) -> bytes:
    """A row's line: its status and ``/verify``'s reply, JSON as it is when it holds no line break, else as text.
    A streamed reply is read to its end, as the client of ``/verify`` would have."""
    body = getattr(response, "body", None)
    if body is None:
        body = b"".join([part if isinstance(part, bytes) else part.encode() async for part in response.body_iterator])
    if (response.media_type or "").startswith("application/json") and b"\n" not in body:
        return b'{"status":%d,"body":%b}' % (response.status_code, body)
    text = json.dumps(body.decode(errors="replace")).encode()  # the client takes it back as the text it was
    return b'{"status":%d,"text":%b}' % (response.status_code, text)


def add_verify_batch(app: FastAPI, server: Any) -> None:
    # FastAPI's request handler of each /verify route, built once; by identity, as routes compare by their fields
    # (the route is kept with it, so that its id is never another's).
    handlers: dict[int, tuple[APIRoute, Any]] = {}

    async def one(route: APIRoute, outer: Request, body: bytes) -> bytes:
        scope = {
            **{key: outer.scope[key] for key in ("client", "server", "state", "scheme") if key in outer.scope},
            "type": "http",
            "http_version": "1.1",
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

        request = Request(scope, receive)
        try:
            # The exit stacks FastAPI's router and middleware give each request: its dependencies see the
            # exception, as over HTTP.
            async with AsyncExitStack() as outer_stack, AsyncExitStack() as inner, AsyncExitStack() as function:
                scope["fastapi_middleware_astack"], scope["fastapi_inner_astack"] = outer_stack, inner
                scope["fastapi_function_astack"] = function
                if id(route) not in handlers:
                    handlers[id(route)] = (route, route.get_route_handler())
                response = await handlers[id(route)][1](request)
        except BaseException as exc:  # one row's: the other rows go on, as other requests would
            current = asyncio.current_task()
            if current is not None and current.cancelling():  # the batch itself is cancelled (a disconnect)
                raise
            try:
                if (handler := _app_handler(app, exc)) is not None:  # a 422, an HTTPException's status and detail
                    response = handler(request, exc)
                    if inspect.isawaitable(response):
                        response = await response
                else:
                    response = _nemo_gym_answer(server, exc)
            except Exception as failed:  # a handler that itself fails: what the middleware makes of that
                response = _nemo_gym_answer(server, failed)
        return await _line(response)

    async def limits() -> Response:
        if _batchable_verify(app) is None:
            return JSONResponse({"detail": "Not Found"}, status_code=404)
        return JSONResponse({"max_rows": MAX_ROWS})

    async def verify_batch(request: Request) -> Response:
        route = _batchable_verify(app)
        if route is None:
            return JSONResponse({"detail": "Not Found"}, status_code=404)
        rows = [line for line in (await request.body()).split(b"\n") if line.strip()]
        if len(rows) > MAX_ROWS:
            return JSONResponse({"detail": f"at most {MAX_ROWS} rows per batch"}, status_code=413)
        answers = await asyncio.gather(*(one(route, request, row) for row in rows))
        return Response(b"\n".join(answers) + b"\n", media_type=NDJSON)

    app.get("/verify_batch")(limits)
    app.post("/verify_batch")(verify_batch)


METRICS_HOOKS = ("compute_metrics", "compute_repeat_metrics", "get_key_metrics")
REPRODUCED_NEMO_GYM = "0.7.0"  # the NeMo Gym whose metrics maths the CLI reproduces
# NeMo Gym's field names, as ``nemo_gym.reward_profile`` reads them.
TASK_INDEX, ROLLOUT_INDEX, MASK_SAMPLE = "_ng_task_index", "_ng_rollout_index", "mask_sample"


def _answers_aggregate_metrics_itself(app: FastAPI, server: Any) -> bool:
    """Whether ``/aggregate_metrics`` is NeMo Gym's: the base class's method, and still what the app routes there."""
    from nemo_gym.base_resources_server import SimpleResourcesServer

    nemo_gyms = getattr(SimpleResourcesServer, "aggregate_metrics", None)
    if nemo_gyms is None:
        return False
    if getattr(getattr(server, "aggregate_metrics", None), "__func__", None) is not nemo_gyms:
        return False
    for route in app.routes:  # the first route of the path is the one Starlette takes
        if isinstance(route, APIRoute) and route.path == "/aggregate_metrics" and "POST" in route.methods:
            endpoint = route.endpoint
            return getattr(endpoint, "__func__", None) is nemo_gyms and getattr(endpoint, "__self__", None) is server
    return False


def _overridden_hooks(server: Any) -> list[str]:
    """The hooks this server has of its own; by the test NeMo Gym applies to ``compute_repeat_metrics``."""
    from nemo_gym.reward_profile import AggregateMetricsMixin

    return [
        name
        for name in METRICS_HOOKS
        if getattr(getattr(server, name, None), "__func__", None) is not getattr(AggregateMetricsMixin, name, None)
    ]


def _by_task(rows: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Rows grouped by task, tasks in index order, each task's rows in the order given: what
    ``compute_aggregate_metrics`` hands its hooks."""
    tasks: dict[Any, list[dict[str, Any]]] = {}
    for row in rows:
        tasks.setdefault(row.get(TASK_INDEX, 0), []).append(row)
    return [tasks[task] for task in sorted(tasks)]


def _plain(value: Any) -> Any:
    """A numpy scalar or array a hook returned, as the Python value it holds."""
    for convert in ("item", "tolist"):
        if callable(getattr(value, convert, None)):
            return getattr(value, convert)()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _json(answer: dict[str, Any]) -> Response:
    """NaN and infinities as Python writes them: the CLI takes the hook's values back as they were."""
    return Response(json.dumps(answer, default=_plain), media_type="application/json")


def add_reverify_metrics(app: FastAPI, server: Any) -> None:
    from importlib.metadata import version

    nemo_gym = version("nemo-gym")

    def refusal() -> Response | None:
        """404 unless NeMo Gym 0.7.0 answers /aggregate_metrics here (another version's maths are not ours, and
        its classes may lack what the hooks are told apart by): the CLI then asks /aggregate_metrics."""
        try:
            if nemo_gym == REPRODUCED_NEMO_GYM and _answers_aggregate_metrics_itself(app, server):
                return None
        except ImportError:
            pass
        return JSONResponse({"detail": "Not Found"}, status_code=404)

    async def hooks() -> Response:
        if (refused := refusal()) is not None:
            return refused
        return JSONResponse({"nemo_gym": nemo_gym, "overridden": _overridden_hooks(server)})

    async def compute(request: Request) -> Response:
        if (refused := refusal()) is not None:
            return refused
        scored: list[dict[str, Any]] = []
        rest = b""
        try:
            # Parsed as they arrive (with ``json``, as FastAPI parses /aggregate_metrics): on this core, while the
            # CLI computes NeMo Gym's maths on its own.
            async for chunk in request.stream():
                *lines, rest = (rest + chunk).split(b"\n")
                scored.extend(row for row in map(json.loads, filter(bytes.strip, lines)) if not row.get(MASK_SAMPLE))
            if rest.strip() and not (row := json.loads(rest)).get(MASK_SAMPLE):
                scored.append(row)
        except ValueError as exc:
            return JSONResponse({"detail": f"a row is not JSON: {exc}"}, status_code=400)
        except ClientDisconnect:  # the CLI needed no answer after all (every row masked, say): nothing to run
            return Response(status_code=499)
        overridden = _overridden_hooks(server)
        answer: dict[str, Any] = {}
        # In NeMo Gym's order, on the same row objects: a hook may leave its mark on them for the next.
        if "compute_metrics" in overridden:
            answer["compute_metrics"] = server.compute_metrics(_by_task(scored))
        if "compute_repeat_metrics" in overridden:
            by_repeat: dict[Any, list[dict[str, Any]]] = {}
            for row in scored:
                by_repeat.setdefault(row.get(ROLLOUT_INDEX, 0), []).append(row)
            # Repeat entries, and so the hook's calls, exist only for two repeats or more.
            repeats = sorted(by_repeat) if len(by_repeat) > 1 else []
            answer["compute_repeat_metrics"] = [
                [repeat, server.compute_repeat_metrics(_by_task(by_repeat[repeat]))] for repeat in repeats
            ]
        return _json(answer)

    async def key_metrics(request: Request) -> Response:
        if (refused := refusal()) is not None:
            return refused
        try:
            agent_metrics = json.loads(await request.body())  # NaN and infinities included, as the hook may see them
        except ValueError as exc:
            return JSONResponse({"detail": f"not JSON: {exc}"}, status_code=400)
        return _json({"key_metrics": server.get_key_metrics(agent_metrics), "agent_metrics": agent_metrics})

    # No "/" in a route's name: a server that exposes its routes as MCP tools refuses such a name at its start.
    app.get("/reverify_metrics")(hooks)
    app.post("/reverify_metrics_compute")(compute)
    app.post("/reverify_metrics_key_metrics")(key_metrics)


def main() -> None:
    from nemo_gym.base_resources_server import SimpleResourcesServer

    setup = SimpleResourcesServer.setup_webserver

    def setup_webserver(self: SimpleResourcesServer) -> FastAPI:
        app = setup(self)
        add_verify_batch(app, self)
        add_reverify_metrics(app, self)
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
