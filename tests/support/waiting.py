"""Waiting on a condition while a CLI run is busy, and a verifier that keeps a run in its aggregation."""

from __future__ import annotations

import asyncio
import subprocess
import threading
import time
from collections.abc import Callable

from aiohttp import web

from tests.support.cli import CLI_LIMIT_S
from tests.support.fake_verifier import FakeVerifier


def wait_for(condition: Callable[[], bool], what: str, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + CLI_LIMIT_S
    while not condition():
        assert process.poll() is None, f"the run ended before it {what}"
        assert time.monotonic() < deadline, f"the run never {what}"
        time.sleep(0.05)


class HeldAggregation(FakeVerifier):
    """``/aggregate_metrics`` waits until the test lets it go: a run kept in its aggregation phase."""

    def __init__(self, *, latency_s: float = 0.0) -> None:
        super().__init__(latency_s=latency_s)
        self.aggregating = threading.Event()
        self.release = threading.Event()

    async def _aggregate(self, request: web.Request) -> web.Response:
        self.aggregating.set()
        await asyncio.get_running_loop().run_in_executor(None, self.release.wait, CLI_LIMIT_S)
        return await super()._aggregate(request)
