"""How many requests an endpoint gets at once, adapted to its answers: halved when it throttles (HTTP 429, or
503 with ``Retry-After``), grown back by one per round of successes. A throttled judge then makes a run slower,
not its rows failed.

A burst of throttled replies to requests sent together halves the limit once: only a request sent after the
last cut may cut again. A reply that says how long to wait (``Retry-After``) holds back every request, not only
its own: otherwise each waiter comes back at once, a fast judge answers them all with another 429, and the
judge sees twenty refused requests for every answered one.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

# The least a pause lasts: a server saying "Retry-After: 0" again and again is not hammered.
LEAST_PAUSE_S = 0.05


@dataclass(slots=True)
class Slot:
    generation: int  # the number of cuts when the request was sent


class AdaptiveLimit:
    def __init__(
        self,
        ceiling: int,
        *,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ceiling = ceiling
        self.limit = float(ceiling)
        self.in_flight = 0
        self.cuts = 0
        self._sleep = sleep
        self._clock = clock
        self._paused_until = 0.0
        # Waiters are woken without awaiting anything, so a slot is always given back, even by a cancelled task.
        self._waiters: list[asyncio.Future[None]] = []

    def pause(self, seconds: float) -> None:
        """No request leaves for ``seconds`` (the throttled reply's ``Retry-After``)."""
        self._paused_until = max(self._paused_until, self._clock() + max(seconds, LEAST_PAUSE_S))

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[Slot]:
        while self.in_flight >= int(self.limit):
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
        self.in_flight += 1
        try:
            # Waited with the slot held: a request queued for a slot before the pause began must wait it out too,
            # and a pause made longer meanwhile is waited out in full.
            until = self._paused_until
            while (paused_s := until - self._clock()) > 0:
                await self._sleep(paused_s)
                if self._paused_until <= until:
                    break
                until = self._paused_until
            yield Slot(self.cuts)
        finally:
            self.in_flight -= 1
            self._wake()

    def throttled(self, slot: Slot) -> None:
        if slot.generation != self.cuts:
            return  # this request left before the last cut, which already answered its burst
        self.cuts += 1
        self.limit = max(1.0, self.limit / 2)

    def succeeded(self) -> None:
        if self.limit >= self.ceiling:
            return
        grown = min(float(self.ceiling), self.limit + 1 / self.limit)  # one more per round of `limit` successes
        room_made = int(grown) > int(self.limit)
        self.limit = grown
        if room_made:
            self._wake()

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)
