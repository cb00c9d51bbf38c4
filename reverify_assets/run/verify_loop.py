"""The verify loop: every planned row to its server, each result appended as its turn comes.

Requests leave in plan (key) order, at most ``concurrency`` in flight; results are written whole lines only, the
output's in the order the rows were sent (``settle_order``: a row that settles early waits a little for those
before it), the failures' as they settle. A crash loses rows still in flight and the few an early row waits with.
The caller sorts the finished file when its rows could not all wait (see ``sorted_output``).
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

from reverify_assets.budget.judge_budget import JudgeBudget, JudgeSpent
from reverify_assets.compare.stored_flips import StoredRewardFlips
from reverify_assets.errors import ServerError
from reverify_assets.files.jsonl import LineAppender
from reverify_assets.files.names import RunFiles
from reverify_assets.keys.rollout_keys import RolloutKey, describe_key
from reverify_assets.processes import secrets as process_secrets
from reverify_assets.rows.result_routing import Destination, failure_message
from reverify_assets.rows.routed_row import RoutedRow, route_result, route_verify_failure
from reverify_assets.run.row_source import PairReader
from reverify_assets.run.settle_order import SettleOrder
from reverify_assets.run.unreachable_watch import UnreachableWatch
from reverify_assets.verifier.client import Route, StoredRowOutcome, VerifierClient, VerifyOutcome

WRITE_BATCH_LINES = 256
TICK_S = 0.5
TICK: Any = object()  # on the settled queue: time to look whether rows have waited too long to be written
PLAN_COLUMNS = ("task", "rollout", "input_offset", "input_line", "rollout_offset", "rollout_line", "server")


@dataclass
class VerifyStats:
    planned: int = 0
    verified: int = 0
    to_output: int = 0
    to_sidecar: int = 0
    not_persisted: int = 0
    failures_by_class: Counter[str] = field(default_factory=Counter)
    # The first message of each class, secrets redacted: what the summary shows as the cause.
    first_failure_messages: dict[str, str] = field(default_factory=dict)
    reward_sum: float = 0.0
    judge_calls: int = 0  # verdicts the judge was asked for, on the rows written to the output
    judge_cache_hits: int = 0  # verdicts the judge-call cache gave instead
    judge_input_tokens: int = 0
    judge_output_tokens: int = 0
    # Why the run stopped sending rows before its plan's end (a judge budget reached), and how many it left.
    stopped_by: str | None = None
    rows_left: int = 0
    # Each row written to the output against the reward its rollout stored: counted here, where both are at hand.
    stored_flips: StoredRewardFlips = field(default_factory=StoredRewardFlips)
    started_at: float = field(default_factory=time.monotonic)
    # Rows are written in the order they left (key order) unless one kept the others waiting too long; when they
    # were, the output needs no sorting pass.
    output_in_key_order: bool = True

    @property
    def mean_reward(self) -> float | None:
        return self.reward_sum / self.to_output if self.to_output else None

    @property
    def rows_per_second(self) -> float:
        elapsed = time.monotonic() - self.started_at
        return self.verified / elapsed if elapsed > 0 else 0.0


# The per-row records below are not frozen: a frozen dataclass's __init__ costs about three times as much.
@dataclass(slots=True)
class _Settled:
    key: RolloutKey
    routed: RoutedRow
    stored_reward: float | None  # what the original run stored on the rollout row
    stored_masked: bool
    server: str


@dataclass(slots=True)
class _Planned:
    """A row whose verify request the CLI builds (servers without ``/reverify_batch``): sent by ``/verify_batch``
    or ``/verify``."""

    key: RolloutKey
    payload: dict[str, Any]
    stored_reward: float | None
    stored_masked: bool


@dataclass(slots=True)
class _StoredPlanned:
    """A row sent as its two stored lines, ``[task, rollout, <input>, <rollout>]``, to ``/reverify_batch``."""

    key: RolloutKey
    row: bytes
    input_at: tuple[int, int]
    rollout_at: tuple[int, int]


def _settle(planned: _Planned, outcome: VerifyOutcome, stamp: dict[str, str], server: str) -> _Settled:
    key, payload = planned.key, planned.payload
    if outcome.result is None:
        routed = route_verify_failure(payload, key, outcome.error or "unknown error", stamp)
    else:
        routed = route_result(outcome.result, payload, key, stamp)
    return _Settled(key, routed, planned.stored_reward, planned.stored_masked, server)


def _settle_stored(
    planned: _StoredPlanned, outcome: StoredRowOutcome, stamp: dict[str, str], pairs: PairReader, server: str
) -> _Settled:
    if outcome.routed is not None:
        return _Settled(planned.key, outcome.routed, outcome.stored_reward, outcome.stored_masked, server)
    # Unscored: read the pair here, as rows are read for servers without the route. A row that cannot be read
    # stops the run with its file and line; the others go to the sidecar, as a failed /verify would.
    pair = pairs.read(planned.key, planned.input_at, planned.rollout_at)
    if outcome.stale:
        raise ServerError(
            f"the server could not make a verify request of the stored rows of {describe_key(planned.key)}, "
            f"which this run reads without fault: {outcome.error}",
            server=server,
        )
    routed = route_verify_failure(pair.payload, planned.key, outcome.error or "unknown error", stamp)
    return _Settled(planned.key, routed, pair.stored_reward, pair.stored_masked, server)


async def _verify_row(
    server: str, client: VerifierClient, batch: list[_Planned], stamp: dict[str, str], slots: asyncio.Semaphore
) -> list[_Settled]:
    """The batch of one row a server without ``/reverify_batch`` is sent: one ``/verify``."""
    (planned,) = batch
    async with slots:
        outcome = await client.verify(orjson.dumps(planned.payload))
    return [_settle(planned, outcome, stamp, server)]


async def _verify_batch(
    server: str, client: VerifierClient, batch: list[_Planned], stamp: dict[str, str], slots: asyncio.Semaphore
) -> list[_Settled]:
    """Rows whose verify requests the CLI built, several to a ``/verify_batch`` request (NeMo Gym's servers)."""
    async with slots:
        outcomes = await client.verify_batch([orjson.dumps(planned.payload) for planned in batch])
    return [_settle(planned, outcome, stamp, server) for planned, outcome in zip(batch, outcomes, strict=True)]


async def _reverify_stored_batch(
    server: str,
    client: VerifierClient,
    batch: list[_StoredPlanned],
    stamp: dict[str, str],
    slots: asyncio.Semaphore,
    pairs: PairReader,
) -> list[_Settled]:
    async with slots:
        outcomes = await client.reverify_batch([planned.row for planned in batch], orjson.dumps(stamp))
    return [
        _settle_stored(planned, outcome, stamp, pairs, server) for planned, outcome in zip(batch, outcomes, strict=True)
    ]


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
    routes: Mapping[str, Route] | None = None,
    on_progress: Callable[[VerifyStats], None] | None = None,
    progress_every_s: float = 5.0,
    budget: JudgeBudget | None = None,
) -> VerifyStats:
    """``routes``: how each server's rows are sent (``VerifierClient.route``; one ``/verify`` a row by default, and
    ``concurrency`` rows in flight is then ``concurrency`` requests). ``batch_rows``: rows per request by server of
    the batch routes (see :func:`batch_sizes`; 1 by default).
    ``budget``: what the judges may spend (``judge_budget``); the rows it leaves unsent are in ``rows_left``.
    """
    stats = VerifyStats(planned=plan.height)
    route_of = {server: (routes or {}).get(server, Route.VERIFY) for server in clients}
    sizes = {server: 1 if route_of[server] is Route.VERIFY else (batch_rows or {}).get(server, 1) for server in clients}
    slots = asyncio.Semaphore(max(1, concurrency // min(sizes.values(), default=1)))
    # Twice the in-flight limit keeps the server busy while results are being written.
    room = asyncio.Semaphore(2 * concurrency)
    settled_rows: asyncio.Queue[_Settled | BaseException | None] = asyncio.Queue()
    running: set[asyncio.Task[list[_Settled]]] = set()
    dispatched = 0  # rows taken from the plan to be sent
    settled_more = asyncio.Event()  # set as rows settle: a dispatch held back by the budget looks again
    order = SettleOrder()
    plan_in_key_order = plan.height < 2 or plan.select(pl.struct("task", "rollout").is_sorted()).item()

    def hand_over(task: asyncio.Task[list[_Settled]]) -> None:
        running.discard(task)
        if task.cancelled():
            settled_rows.put_nowait(asyncio.CancelledError("a verify request was cancelled"))
        elif task.exception() is not None:
            settled_rows.put_nowait(task.exception())
        else:
            for settled in task.result():
                settled_rows.put_nowait(settled)

    def send(server: str, batch: list[Any]) -> None:
        if route_of[server] is Route.STORED_ROWS:
            work = _reverify_stored_batch(server, clients[server], batch, stamps[server], slots, pairs)
        elif route_of[server] is Route.VERIFY_BATCH:
            work = _verify_batch(server, clients[server], batch, stamps[server], slots)
        else:
            work = _verify_row(server, clients[server], batch, stamps[server], slots)
        task = asyncio.create_task(work)
        running.add(task)
        task.add_done_callback(hand_over)

    async def dispatch() -> None:
        nonlocal dispatched
        filling: dict[str, list[Any]] = {server: [] for server in clients}
        try:
            for task, rollout, input_offset, input_line, rollout_offset, rollout_line, server in plan.select(
                PLAN_COLUMNS
            ).iter_rows():
                key, input_at, rollout_at = (task, rollout), (input_offset, input_line), (rollout_offset, rollout_line)
                planned: _Planned | _StoredPlanned
                if route_of[server] is Route.STORED_ROWS:
                    stored_input, stored_rollout = pairs.read_lines(input_at, rollout_at)
                    row = b"[%d,%d,%b,%b]" % (task, rollout, stored_input, stored_rollout)
                    planned = _StoredPlanned(key, row, input_at, rollout_at)
                else:
                    pair = pairs.read(key, input_at, rollout_at)
                    planned = _Planned(key, pair.payload, pair.stored_reward, pair.stored_masked)
                if room.locked():  # half-filled batches of several servers must not hold all the room
                    for waiting_server, batch in filling.items():
                        if batch:
                            send(waiting_server, batch)
                            filling[waiting_server] = []
                await room.acquire()
                if budget is not None and budget.must_wait(_spent(stats, dispatched)):
                    for waiting_server, batch in filling.items():  # the rows held back must be on their way
                        if batch:
                            send(waiting_server, batch)
                            filling[waiting_server] = []
                    while budget.must_wait(_spent(stats, dispatched)):
                        settled_more.clear()
                        await settled_more.wait()
                # Asked once there is room: what the rows settled meanwhile spent counts.
                if budget is not None and (why := budget.exhausted(_spent(stats, dispatched))) is not None:
                    room.release()
                    stats.stopped_by = why
                    break
                filling[server].append(planned)
                order.sent(key)
                dispatched += 1
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

    async def tick() -> None:
        """Wakes the writer while rows wait for a slow one, so that their wait is bounded in time too."""
        while True:
            await asyncio.sleep(TICK_S)
            settled_rows.put_nowait(TICK)

    producer = asyncio.create_task(dispatch())
    ticker = asyncio.create_task(tick())
    last_report = time.monotonic()
    redact = process_secrets.line_redactor()
    unreachable = UnreachableWatch()
    with LineAppender(files.output) as output, LineAppender(files.sidecar) as sidecar:
        pending: dict[Destination, list[bytes]] = {Destination.OUTPUT: [], Destination.SIDECAR: []}

        def flush() -> None:
            if redact is not None:  # a server may quote a key back: in an error it got, in a failure row
                for lines in pending.values():
                    lines[:] = map(redact, lines)
            output.write_lines(pending[Destination.OUTPUT])
            sidecar.write_lines(pending[Destination.SIDECAR])
            pending[Destination.OUTPUT].clear()
            pending[Destination.SIDECAR].clear()

        try:
            dispatched_all = False
            while not dispatched_all or stats.verified < dispatched:
                item = await settled_rows.get()
                if item is TICK:
                    if order.overdue():
                        pending[Destination.OUTPUT].extend(order.give_up())
                    if settled_rows.empty():
                        flush()
                    continue
                if item is None:
                    dispatched_all = True
                    continue
                if isinstance(item, BaseException):
                    raise item
                room.release()
                stats.verified += 1
                destination = item.routed.destination
                if destination is Destination.SIDECAR:
                    pending[Destination.SIDECAR].append(item.routed.line)
                line = item.routed.line if destination is Destination.OUTPUT else None
                pending[Destination.OUTPUT].extend(order.settled(item.key, line))
                _count(stats, item, unreachable)  # may stop the run: the row is pending, and kept
                settled_more.set()
                # Write whenever nothing else has settled yet, so finished rows reach disk promptly.
                if settled_rows.empty() or sum(map(len, pending.values())) >= WRITE_BATCH_LINES:
                    flush()
                if on_progress and time.monotonic() - last_report >= progress_every_s:
                    last_report = time.monotonic()
                    on_progress(stats)
            pending[Destination.OUTPUT].extend(order.drain())  # none waits once every row settled
            flush()
            await producer
        finally:
            # Rows that settled before an error (or Ctrl-C) are paid for: keep them, queued ones included.
            def keep_queued() -> None:
                pending[Destination.OUTPUT].extend(order.drain())
                while not settled_rows.empty():
                    item = settled_rows.get_nowait()
                    if isinstance(item, _Settled) and item.routed.destination is not Destination.NOWHERE:
                        pending[item.routed.destination].append(item.routed.line)
                flush()

            keep_queued()
            producer.cancel()
            ticker.cancel()
            for task in list(running):
                task.cancel()
            await asyncio.gather(producer, ticker, *running, return_exceptions=True)
            keep_queued()  # a request that had finished, its rows handed over only now
    stats.rows_left = plan.height - dispatched
    stats.output_in_key_order = order.in_order and plan_in_key_order
    return stats


def _spent(stats: VerifyStats, dispatched: int) -> JudgeSpent:
    tokens = (stats.judge_input_tokens, stats.judge_output_tokens)
    return JudgeSpent(stats.judge_calls, *tokens, rows=stats.to_output, in_flight=dispatched - stats.verified)


def _count(stats: VerifyStats, settled: _Settled, unreachable: UnreachableWatch) -> None:
    routed = settled.routed
    if routed.destination is Destination.OUTPUT:
        stats.to_output += 1
        stats.reward_sum += routed.reward or 0.0
        stats.judge_calls += routed.judge_calls
        stats.judge_cache_hits += routed.judge_cache_hits
        stats.judge_input_tokens += routed.judge_input_tokens
        stats.judge_output_tokens += routed.judge_output_tokens
        stats.stored_flips.add(settled.stored_reward, routed.reward, masked=routed.masked or settled.stored_masked)
        if unreachable.watching(settled.server):
            unreachable.settled(settled.server, None, None)
    elif routed.destination is Destination.SIDECAR:
        stats.to_sidecar += 1
        failure_class = routed.failure_class or "unknown"
        stats.failures_by_class[failure_class] += 1
        watching = unreachable.watching(settled.server)
        if watching or failure_class not in stats.first_failure_messages:  # parsed for these rows only
            # Redacted as a message, not as a line: a key replaced inside the JSON could leave it unreadable.
            message = failure_message(orjson.loads(routed.line))
            message = None if message is None else process_secrets.redact(message)
            stats.first_failure_messages.setdefault(failure_class, message or "(no message)")
            if watching:
                unreachable.settled(settled.server, failure_class, message)
    else:
        stats.not_persisted += 1
