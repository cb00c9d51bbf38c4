"""A caching loopback proxy in front of a model server a NeMo Gym judge calls: its judge-call cache.

NeMo Gym's judge servers ask their judge through a model server (``judge_model_server: {type:
responses_api_models, name: ...}``), which we cannot change. The launcher starts this proxy between the two
(``verifier.launcher``): the judge server is told the model server is at the proxy's address, and the proxy sends
on whatever it cannot answer from the cache (``judge_cache.store``).

A POST with a JSON object body that is not a streamed request is looked up by the model server's identity (its
type and config, secrets left out: its address changes from run to run, its upstream and model do not), the
path with its query and the body; a complete 200 JSON answer is kept (not a Responses object left
``incomplete``, nor a chat completion cut at ``length``), as the model server gave it: this process knows no
secret to redact. An answer from the cache is the stored body, with ``"metadata": {"reverify_judge_cache":
"hit"}`` added to a Responses API object, which the judge server stores in its ``judge_evaluations``: the run
counts those as cache hits (``rows.routed_row``). Everything else (GETs, a
failed call, a stream) passes through unchanged and is not kept.

Run as a child of the launcher: reads ``{"endpoint": ..., "target": url, "cache": path}`` on stdin, prints
``LISTENING <url>`` once serving, and exits when the parent closes stdin or dies (``processes.lifelines``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import orjson

from reverify_assets.processes.lifelines import exit_with_parent
from reverify_assets.rows.routed_row import CACHE_HIT_METADATA

KEPT_KIND = "model_server_reply"  # the model server's whole 200 body
# Hop by hop, or recomputed for the body sent: never copied from one side to the other.
_NOT_FORWARDED = frozenset({"host", "content-length", "transfer-encoding", "connection", "keep-alive"})
_UNPASSED = _NOT_FORWARDED | {"content-encoding"}  # aiohttp has decoded the body it read


def marked_hit(body: bytes) -> bytes:
    """The stored body as the judge server gets it: a Responses API object says it came from the cache."""
    try:
        reply = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body
    if not isinstance(reply, dict) or reply.get("object") != "response":
        return body
    metadata = reply.get("metadata") if isinstance(reply.get("metadata"), dict) else {}
    reply["metadata"] = {**metadata, CACHE_HIT_METADATA: "hit"}
    return orjson.dumps(reply)


def complete_reply(body: bytes) -> bool:
    """A reply worth keeping: not cut short (a Responses object ``incomplete``, a chat completion stopped at
    ``length``), which another call might answer in full."""
    try:
        reply = orjson.loads(body)
    except orjson.JSONDecodeError:
        return False
    if not isinstance(reply, dict):
        return False
    if reply.get("object") == "response":
        return reply.get("status") == "completed"
    choices = reply.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        return choices[0].get("finish_reason") != "length"
    return True


def cacheable_request(method: str, body: bytes) -> dict[str, Any] | None:
    """The request as a key covers it, or None when it is not to be answered from the cache."""
    if method != "POST":
        return None
    try:
        request = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    return request if isinstance(request, dict) and not request.get("stream") else None


def build_proxy_app(endpoint: str, target: str, cache_path: Path) -> Any:
    import aiohttp
    from aiohttp import web

    from reverify_assets.judge_cache.store import JudgeCallCache, request_key

    cache = JudgeCallCache(cache_path)
    sessions: list[aiohttp.ClientSession] = []

    async def forward(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        asked = cacheable_request(request.method, body)
        key = None if asked is None else request_key(KEPT_KIND, f"{endpoint}{request.path_qs}", asked)
        if key is not None and (kept := cache.get(key)) is not None:
            return web.Response(body=marked_hit(kept), content_type="application/json")
        headers = {name: value for name, value in request.headers.items() if name.lower() not in _NOT_FORWARDED}
        url = f"{target}{request.path_qs}"
        try:
            async with sessions[0].request(request.method, url, data=body, headers=headers) as reply:
                payload = await reply.read()
                status, content_type = reply.status, reply.content_type
                passed = {name: value for name, value in reply.headers.items() if name.lower() not in _UNPASSED}
        except aiohttp.ClientError as exc:
            # As the judge server would have met it calling the model server itself: retryable, and named.
            text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            return web.Response(status=502, text=f"the judge-call cache's proxy could not reach {target}: {text}")
        if key is not None and status == 200 and content_type == "application/json" and complete_reply(payload):
            cache.put(key, payload)
        return web.Response(status=status, body=payload, headers=passed)

    async def open_session(_: web.Application) -> Any:
        # The judge server's own timeouts apply: it waits on us as it would on the model server, and a call it
        # gives up on is cancelled here (``handler_cancellation``).
        sessions.append(aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None)))
        yield
        await sessions[0].close()
        cache.close()

    app = web.Application(client_max_size=1 << 30)
    app.cleanup_ctx.append(open_session)
    app.router.add_route("*", "/{tail:.*}", forward)
    return app


def main() -> None:
    exit_with_parent()
    import asyncio

    import orjson
    from aiohttp import web

    from reverify_assets.rows.verifier_wire import LOOPBACK, READY_PREFIX, bind_loopback

    spec = orjson.loads(sys.stdin.buffer.readline())

    async def serve() -> None:
        app = build_proxy_app(spec["endpoint"], spec["target"], Path(spec["cache"]))
        # A judge server that gave up on a call (its own timeout) hangs up: the call to the model server ends too.
        runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await runner.setup()
        sock = bind_loopback()
        await web.SockSite(runner, sock).start()
        print(f"{READY_PREFIX}http://{LOOPBACK}:{sock.getsockname()[1]}", flush=True)
        await asyncio.Event().wait()  # until the lifeline ends the process

    asyncio.run(serve())


if __name__ == "__main__":
    main()
