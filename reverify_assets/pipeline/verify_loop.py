"""The verify loop: every planned row to its server, each result appended as soon as it settles.

Requests leave in plan (key) order, at most ``concurrency`` in flight; results are written in the
order they settle, whole lines only, so a crash loses nothing but rows still in flight. The caller
sorts the finished file (see ``sorted_output``).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
import polars as pl

from reverify_assets.compare.stored_flips import StoredRewardFlips, is_masked, numeric_reward
from reverify_assets.lib.file_names import RunFiles
from reverify_assets.lib.jsonl import LineAppender
from reverify_assets.lib.keys import RolloutKey
from reverify_assets.lib.result_routing import (
    FAILURE_CLASS_FIELD,
    Destination,
    destination_of,
    stamp_result,
    verify_failure_row,
)
from reverify_assets.pipeline.row_source import PairReader
from reverify_assets.verifier.client import VerifierClient, VerifyOutcome

WRITE_BATCH_LINES = 256


@dataclass
class VerifyStats:
    planned: int = 0
    verified: int = 0
    to_output: int = 0
    to_sidecar: int = 0
    not_persisted: int = 0
    failures_by_class: Counter[str] = field(default_factory=Counter)
    reward_sum: float = 0.0
    # Each row written to the output against the reward its rollout stored: counted here, where both are at hand.
    stored_flips: StoredRewardFlips = field(default_factory=StoredRewardFlips)
    started_at: float = field(default_factory=time.monotonic)
    # Rows usually settle in the order they left; when they all did, the output needs no sorting pass.
    output_in_key_order: bool = True
    last_output_key: RolloutKey | None = None

    @property
    def mean_reward(self) -> float | None:
        return self.reward_sum / self.to_output if self.to_output else None

    @property
    def rows_per_second(self) -> float:
        elapsed = time.monotonic() - self.started_at
        return self.verified / elapsed if elapsed > 0 else 0.0


@dataclass(frozen=True, slots=True)
class _Settled:
    key: RolloutKey
    destination: Destination
    line: bytes
    failure_class: str | None
    reward: float | None
    masked: bool
    stored_reward: float | None
    stored_masked: bool


@dataclass(frozen=True, slots=True)
class _Planned:
    key: RolloutKey
    payload: dict[str, Any]
    stored_reward: float | None  # what the original run stored on the rollout row
    stored_masked: bool


def _settle(planned: _Planned, outcome: VerifyOutcome, stamp: dict[str, str]) -> _Settled:
    key, payload = planned.key, planned.payload
    if outcome.result is None:
        row = verify_failure_row(payload, key, outcome.error or "unknown error", stamp)
    else:
        row = stamp_result(outcome.result, payload, key, stamp)
    destination = destination_of(row)
    return _Settled(
        key,
        destination,
        orjson.dumps(row) + b"\n",
        row.get(FAILURE_CLASS_FIELD) if destination is Destination.SIDECAR else None,
        numeric_reward(row),
        is_masked(row),
        planned.stored_reward,
        planned.stored_masked,
    )


async def _verify_batch(
    client: VerifierClient, batch: list[_Planned], stamp: dict[str, str], slots: asyncio.Semaphore
) -> list[_Settled]:
    bodies = [orjson.dumps(planned.payload) for planned in batch]
    async with slots:
        if len(batch) == 1:
            outcomes = [await client.verify(bodies[0])]
        else:
            outcomes = await client.verify_batch(bodies)
    return [_settle(planned, outcome, stamp) for planned, outcome in zip(batch, outcomes, strict=True)]


def batch_sizes(limits: Mapping[str, int], concurrency: int) -> dict[str, int]:
    """Rows per request for each server: a quarter of the rows in flight, so four requests overlap (the
    server grades one while we write another's rows), within what the server takes."""
    return {server: max(1, min(limit, concurrency // 4)) for server, limit in limits.items()}


async def verify_plan(
    plan: pl.DataFrame,
    pairs: PairReader,
    clients: Mapping[str, VerifierClient],
    files: RunFiles,
    stamps: Mapping[str, dict[str, str]],
    *,
    concurrency: int,
    batch_rows: Mapping[str, int] | None = None,
    on_progress: Callable[[VerifyStats], None] | None = None,
    progress_every_s: float = 5.0,
) -> VerifyStats:
    """``batch_rows``: rows per request by server (see :func:`batch_sizes`); 1 (the default) is one
    ``/verify`` per row, and ``concurrency`` rows in flight is then ``concurrency`` requests."""
    stats = VerifyStats(planned=plan.height)
    sizes = {server: (batch_rows or {}).get(server, 1) for server in clients}
    slots = asyncio.Semaphore(max(1, concurrency // min(sizes.values(), default=1)))
    # Twice the in-flight limit keeps the server busy while results are being written.
    room = asyncio.Semaphore(2 * concurrency)
    settled_rows: asyncio.Queue[_Settled | BaseException | None] = asyncio.Queue()
    running: set[asyncio.Task[list[_Settled]]] = set()

    def hand_over(task: asyncio.Task[list[_Settled]]) -> None:
        running.discard(task)
        if task.cancelled():
            settled_rows.put_nowait(asyncio.CancelledError("a verify request was cancelled"))
        elif task.exception() is not None:
            settled_rows.put_nowait(task.exception())
        else:
            for settled in task.result():
                settled_rows.put_nowait(settled)

    def send(server: str, batch: list[_Planned]) -> None:
        task = asyncio.create_task(_verify_batch(clients[server], batch, stamps[server], slots))
        running.add(task)
        task.add_done_callback(hand_over)

    async def dispatch() -> None:
        filling: dict[str, list[_Planned]] = {server: [] for server in clients}
        try:
            for row in plan.iter_rows(named=True):
                key = (row["task"], row["rollout"])
                pair = pairs.read(
                    key, (row["input_offset"], row["input_line"]), (row["rollout_offset"], row["rollout_line"])
                )
                server = row["server"]
                if room.locked():  # half-filled batches of several servers must not hold all the room
                    for waiting_server, batch in filling.items():
                        if batch:
                            send(waiting_server, batch)
                            filling[waiting_server] = []
                await room.acquire()
                filling[server].append(_Planned(key, pair.payload, pair.stored_reward, pair.stored_masked))
                if len(filling[server]) >= sizes[server]:
                    send(server, filling[server])
                    filling[server] = []
            for server, batch in filling.items():
                if batch:
                    send(server, batch)
        except Exception as exc:  # a row that cannot be read must stop the run, not hang it
            await settled_rows.put(exc)
        except BaseException as exc:
            # Ctrl-C: Dagster raises its interrupt in whatever frame the signal lands, often this one, the
            # busiest; unreported, the loop would wait forever for rows that are never sent.
            settled_rows.put_nowait(exc)
            raise
        await settled_rows.put(None)

    producer = asyncio.create_task(dispatch())
    last_report = time.monotonic()
    with LineAppender(files.output) as output, LineAppender(files.sidecar) as sidecar:
        pending: dict[Destination, list[bytes]] = {Destination.OUTPUT: [], Destination.SIDECAR: []}

        def flush() -> None:
            output.write_lines(pending[Destination.OUTPUT])
            sidecar.write_lines(pending[Destination.SIDECAR])
            pending[Destination.OUTPUT].clear()
            pending[Destination.SIDECAR].clear()

        try:
            dispatched_all = False
            while not dispatched_all or stats.verified < plan.height:
                item = await settled_rows.get()
                if item is None:
                    dispatched_all = True
                    continue
                if isinstance(item, BaseException):
                    raise item
                room.release()
                stats.verified += 1
                _count(stats, item)
                if item.destination is not Destination.NOWHERE:
                    pending[item.destination].append(item.line)
                # Rows are written in the order they settle, so one slow row never holds the others back;
                # write whenever nothing else has settled yet, so finished rows reach disk promptly.
                if settled_rows.empty() or sum(map(len, pending.values())) >= WRITE_BATCH_LINES:
                    flush()
                if on_progress and time.monotonic() - last_report >= progress_every_s:
                    last_report = time.monotonic()
                    on_progress(stats)
            flush()
            await producer
        finally:
            # Rows that settled before an error (or Ctrl-C) are paid for: keep them, queued ones included.
            while not settled_rows.empty():
                item = settled_rows.get_nowait()
                if isinstance(item, _Settled) and item.destination is not Destination.NOWHERE:
                    pending[item.destination].append(item.line)
            flush()
            producer.cancel()
            for task in list(running):
                task.cancel()
            await asyncio.gather(producer, *running, return_exceptions=True)
    return stats


def _count(stats: VerifyStats, settled: _Settled) -> None:
    if settled.destination is Destination.OUTPUT:
        if stats.last_output_key is not None and settled.key < stats.last_output_key:
            stats.output_in_key_order = False
        stats.last_output_key = settled.key
        stats.to_output += 1
        stats.reward_sum += settled.reward or 0.0
        stats.stored_flips.add(settled.stored_reward, settled.reward, masked=settled.masked or settled.stored_masked)
    elif settled.destination is Destination.SIDECAR:
        stats.to_sidecar += 1
        stats.failures_by_class[settled.failure_class or "unknown"] += 1
    else:
        stats.not_persisted += 1
