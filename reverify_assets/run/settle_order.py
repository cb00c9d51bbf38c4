"""Rows written in the order they were sent, so that a fresh output needs no sorting pass at the end.

Requests leave in plan (key) order, but rows settle a little out of it: a batch of a later key answers before an
earlier one. A row that settles early waits here for the rows sent before it, and is released with them. Sorting a
finished file costs a scan and a copy of all of it (1.3 s for 100,000 rows of NeMo Gym's mcqa, 0.7 s for 10,000 of
circle_count's, whose rows carry an image each).

Waiting is bounded, so that one slow row (a judge retried after a back-off) neither holds the others in memory nor
keeps paid-for rows off the disk for long: when more than ``max_held`` rows or ``max_held_bytes`` wait, or they have
waited ``max_wait_s`` for the same row (``overdue``, which the verify loop also asks on a timer), every waiting row
is released and so is every later one as it settles; the caller then sorts the file, as it always did.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Hashable

MAX_HELD = 4096
MAX_HELD_BYTES = 64 << 20
MAX_WAIT_S = 2.0


class SettleOrder:
    def __init__(
        self,
        max_held: int = MAX_HELD,
        max_held_bytes: int = MAX_HELD_BYTES,
        max_wait_s: float = MAX_WAIT_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._max_held, self._max_held_bytes, self._max_wait_s = max_held, max_held_bytes, max_wait_s
        self._clock = clock
        self._sent: deque[Hashable] = deque()  # keys not released yet, in the order they were sent
        self._settled: dict[Hashable, bytes | None] = {}  # waiting: a line to write, or None (nothing to write)
        self._held_bytes = 0
        self._waiting_since: float | None = None  # since when the rows held have waited for the first unsettled one
        self.in_order = True  # every line released so far in the order its row was sent

    def sent(self, key: Hashable) -> None:
        if self.in_order:
            self._sent.append(key)

    def settled(self, key: Hashable, line: bytes | None) -> list[bytes]:
        """The lines that may be written now (``line`` is None for a row with nothing to write here)."""
        if not self.in_order:
            return [] if line is None else [line]
        self._settled[key] = line
        self._held_bytes += len(line or b"")
        released = []
        while self._sent and self._sent[0] in self._settled:
            if (ready := self._settled.pop(self._sent.popleft())) is not None:
                released.append(ready)
                self._held_bytes -= len(ready)
        if released or self._waiting_since is None:
            self._waiting_since = self._clock() if self._settled else None
        if len(self._settled) > self._max_held or self._held_bytes > self._max_held_bytes or self.overdue():
            released += self.give_up()
        return released

    def overdue(self) -> bool:
        """Whether the rows held have waited too long for the one before them."""
        return self._waiting_since is not None and self._clock() - self._waiting_since > self._max_wait_s

    def give_up(self) -> list[bytes]:
        """Every waiting line, in the order sent; later ones are released as they settle."""
        self.in_order = False
        return self.drain()

    def drain(self) -> list[bytes]:
        """Every waiting line, in the order sent (the run stops: they are paid for)."""
        waiting = [self._settled[key] for key in self._sent if key in self._settled]
        self._sent.clear()
        self._settled.clear()
        self._held_bytes, self._waiting_since = 0, None
        return [line for line in waiting if line is not None]
