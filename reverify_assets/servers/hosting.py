"""Serving built-in resources servers on loopback sockets, in this process."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable, Sequence
from contextlib import suppress
from pathlib import Path

from aiohttp import web

from reverify_assets.config.topology import ServerBlock
from reverify_assets.rows.verifier_wire import LOOPBACK, bind_loopback
from reverify_assets.servers.app import build_app
from reverify_assets.servers.registry import build_server


async def serve_until_stopped(
    blocks: Sequence[ServerBlock],
    *,
    judge_cache: Path | None,
    on_listening: Callable[[ServerBlock, str], None],
    stop: asyncio.Event | None = None,
) -> None:
    """Serve each block on its own port (its ``port`` field, else a free one) until SIGINT/SIGTERM or ``stop``."""
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        with suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signum, stop.set)
    runners: list[web.AppRunner] = []
    try:
        for block in blocks:
            runner = web.AppRunner(
                build_app(build_server(block, judge_cache=judge_cache)), access_log=None, handle_signals=False
            )
            await runner.setup()
            runners.append(runner)
            sock = bind_loopback(int(block.fields.get("port") or 0))
            await web.SockSite(runner, sock).start()
            on_listening(block, f"http://{LOOPBACK}:{sock.getsockname()[1]}")
        await stop.wait()
    finally:
        for runner in runners:
            await runner.cleanup()
