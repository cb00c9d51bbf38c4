"""A ``VerifierClient`` on a loopback test server around any aiohttp app, retrying at once (three attempts)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import aiohttp
from aiohttp import web
from aiohttp.test_utils import TestServer

from reverify_assets.rows.verifier_wire import RetryPolicy
from reverify_assets.verifier.client import VerifierClient


@asynccontextmanager
async def client_for(app: web.Application) -> AsyncIterator[VerifierClient]:
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        async with aiohttp.ClientSession() as session:
            retry = RetryPolicy(attempts=3, base_delay_s=0, max_delay_s=0, timeout_s=10)
            yield VerifierClient("s", str(server.make_url("")), session, retry)
    finally:
        await server.close()


def run(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(test())
