"""Several copies of one stateless server behind one client: each request goes to the copy with the fewest in flight.

A server that declares itself stateless grades a request from the request and its config alone, so any copy
gives the same answer. Copies may join while requests are already being sent (they start after the first one
has said it is stateless). ``/reverify_mode``, the batch limits and ``/aggregate_metrics`` go to the first copy.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from reverify_assets.verifier.client import StoredRowOutcome, VerifierClient, VerifyOutcome

Outcome = TypeVar("Outcome")


class ReplicaSet(VerifierClient):
    def __init__(self, first: VerifierClient) -> None:
        super().__init__(first.name, first.base_url, first.session, first.retry)
        self.replicas = [first]
        self._in_flight = [0]

    def add(self, replica: VerifierClient) -> int:
        """Another copy; how many there are now."""
        self.replicas.append(replica)
        self._in_flight.append(0)
        return len(self.replicas)

    async def _on_least_busy(self, call: Callable[[VerifierClient], Awaitable[Outcome]]) -> Outcome:
        chosen = min(range(len(self.replicas)), key=self._in_flight.__getitem__)
        self._in_flight[chosen] += 1
        try:
            return await call(self.replicas[chosen])
        finally:
            self._in_flight[chosen] -= 1

    async def verify(self, body: bytes) -> VerifyOutcome:
        return await self._on_least_busy(lambda replica: replica.verify(body))

    async def reverify_batch(self, rows: list[bytes], stamp: bytes) -> list[StoredRowOutcome]:
        return await self._on_least_busy(lambda replica: replica.reverify_batch(rows, stamp))

    async def verify_batch(self, bodies: list[bytes]) -> list[VerifyOutcome]:
        return await self._on_least_busy(lambda replica: replica.verify_batch(bodies))
