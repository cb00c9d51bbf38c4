"""Running the local judge model on a loopback port in a background thread (tests, notebooks, the demo)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from reverify_assets.local_judge.server import JudgeModel
from reverify_assets.local_judge.settings import FailureSettings

LOOPBACK = "127.0.0.1"


class BackgroundJudgeModel:
    """``with BackgroundJudgeModel() as judge:`` serves at ``judge.url`` until the block ends."""

    def __init__(self, settings: FailureSettings | None = None, *, api_key: str | None = None, port: int = 0) -> None:
        self.model = JudgeModel(settings, api_key=api_key)
        self.port = port
        self.url = ""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="local-judge-model", daemon=True)
        self._runner: web.AppRunner | None = None

    def __enter__(self) -> BackgroundJudgeModel:
        self._thread.start()
        self._call(self._start())
        return self

    def __exit__(self, *exc: object) -> None:
        if self._runner is not None:
            self._call(self._runner.cleanup())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    def configure(self, **changes: Any) -> None:
        """Change knobs from the test's thread: applied on the server's loop, between two requests."""
        self._call(self._configure(changes))

    def stats(self) -> dict[str, Any]:
        return self._call(self._stats())

    async def _configure(self, changes: Mapping[str, Any]) -> None:
        self.model.configure(changes)

    async def _stats(self) -> dict[str, Any]:
        return self.model.stats.as_dict()

    async def _start(self) -> None:
        self._runner = web.AppRunner(self.model.app(), access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, LOOPBACK, self.port)
        await site.start()
        self.url = f"http://{LOOPBACK}:{self._runner.addresses[0][1]}"

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=10)
