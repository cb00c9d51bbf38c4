"""Ctrl-C or SIGTERM during the verify loop cancels it (its clean-up runs) and comes out as KeyboardInterrupt."""

from __future__ import annotations

import asyncio
import os
import signal
from types import FrameType

import pytest

from reverify_assets.processes import interrupts
from reverify_assets.run.verification import _interruptible


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_cancels_the_work_runs_its_cleanup_is_noted_and_restores_the_handlers(
    monkeypatch: pytest.MonkeyPatch, signum: signal.Signals
) -> None:
    cleaned_up: list[bool] = []
    calls: list[int] = []
    monkeypatch.setattr(interrupts, "_noted", [])

    def previous_handler(signum: int, frame: FrameType | None) -> None:
        calls.append(signum)

    async def work() -> str:
        # A signal landing in one of asyncio's own callbacks used to be logged and ignored.
        asyncio.get_running_loop().call_later(0.05, os.kill, os.getpid(), signum)
        try:
            await asyncio.sleep(10)
        finally:
            cleaned_up.append(True)
        return "finished"

    originals = {other: signal.signal(other, previous_handler) for other in interrupts.INTERRUPTS}
    try:
        with pytest.raises(KeyboardInterrupt):
            asyncio.run(_interruptible(work()))
        assert cleaned_up == [True]
        assert all(signal.getsignal(other) is previous_handler for other in interrupts.INTERRUPTS)
        assert calls == [], "the signal went to the loop, not to the handler in force before"
        assert interrupts.received() == signum
    finally:
        for other, original in originals.items():
            signal.signal(other, original)


def test_work_that_is_not_interrupted_returns_its_result() -> None:
    async def work() -> str:
        await asyncio.sleep(0)
        return "finished"

    assert asyncio.run(_interruptible(work())) == "finished"


def test_a_cancellation_that_is_not_ctrl_c_stays_a_cancellation() -> None:
    async def work() -> None:
        raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(_interruptible(work()))
