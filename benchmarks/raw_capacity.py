"""The verifier's raw capacity: rows/s one built-in server sustains for a client that does nothing else.

`reverify serve` runs the server in the foreground; a minimal aiohttp client POSTs ready-made requests to it
with a fixed number of rows in flight. The requests hold the exact bytes ``reverify run`` sends, built before
the clock starts, so the figure is the ceiling the pipeline's own reading and writing could at best reach.

The client speaks the protocol the pipeline would (see ``Protocol.pipeline``): ``/reverify_batch`` with the
stored lines when the server advertises it, rows per request as ``run.verify_loop.batch_sizes`` gives
them, else one ``/verify`` per row with built bodies (the same join, ``build_verify_payload`` and
``orjson.dumps``).
"""

from __future__ import annotations

import asyncio
import re
import selectors
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson
from process_memory import TreeReport, TreeSampler, machine_cpu_seconds, tree_cpu_seconds

from reverify_assets.rows.payload import build_verify_payload
from reverify_assets.run.verify_loop import batch_sizes

__all__ = ["Protocol", "RawCapacity", "Requests", "ServeProcess", "build_requests", "measure_raw_capacity"]

LISTENING = re.compile(r"listening on (http://\S+)")
JSON_HEADERS = {"Content-Type": "application/json"}
START_TIMEOUT_S = 60.0
# Enough requests to open every pooled connection and settle the server's allocator before timing.
WARMUP_ROWS = 1000

Key = tuple[int, int]


@dataclass
class RawCapacity:
    rows: int
    seconds: float
    concurrency: int
    failures: int  # non-200 answers: the figure is meaningless if there are any
    client_cpu_s: float  # this process's CPU time in the timed part: a busy client would cap the figure
    server_cpu_s: float  # the server tree's CPU time in the timed part
    machine_busy_s: float  # all cores' busy time in the timed part, whoever used it
    machine_steal_s: float  # the part of it the hypervisor gave to other virtual machines
    protocol: Protocol = field(default_factory=lambda: Protocol("/verify"))
    memory: TreeReport | None = None

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else 0.0


@dataclass(frozen=True)
class Requests:
    """The first rows of a dataset as each protocol sends them, in the same order."""

    verify_bodies: list[bytes]  # /verify
    stored_rows: list[bytes]  # /reverify_batch: [task, rollout, <input line>, <rollout line>]


def build_requests(inputs: Path, rollouts: Path, count: int) -> Requests:
    """The first ``count`` rows of ``rollouts``, joined with their input rows by key."""
    wanted: dict[Key, tuple[bytes, dict[str, Any]]] = {}
    with rollouts.open("rb") as fh:
        for line in fh:
            row = orjson.loads(line)
            wanted[(row["_ng_task_index"], row["_ng_rollout_index"])] = (line.rstrip(b"\r\n"), row)
            if len(wanted) >= count:
                break
    requests = Requests([], [])
    with inputs.open("rb") as fh:
        for line in fh:
            row = orjson.loads(line)
            key = (row["_ng_task_index"], row["_ng_rollout_index"])
            found = wanted.pop(key, None)
            if found is not None:
                rollout_line, rollout = found
                requests.verify_bodies.append(orjson.dumps(build_verify_payload(row, rollout, key)))
                requests.stored_rows.append(b"[%d,%d,%b,%b]" % (*key, line.rstrip(b"\r\n"), rollout_line))
                if not wanted:
                    break
    if wanted:
        raise RuntimeError(f"{len(wanted)} rollouts of {rollouts} have no input row in {inputs}")
    return requests


class ServeProcess:
    """`reverify serve --config …` in the foreground; its first stdout line names the URL."""

    def __init__(self, command: Sequence[str], log: Path, env: dict[str, str]) -> None:
        with log.open("w") as err:
            self.process = subprocess.Popen(list(command), stdout=subprocess.PIPE, stderr=err, text=True, env=env)
        self.log = log
        assert self.process.stdout is not None  # stdout=PIPE always gives one
        # Bounded: a server that hangs before announcing itself must not hold the benchmark lock forever.
        with selectors.DefaultSelector() as selector:
            selector.register(self.process.stdout, selectors.EVENT_READ)
            ready = selector.select(timeout=START_TIMEOUT_S)
        first = self.process.stdout.readline() if ready else ""  # EOF (a failed start) ends the wait too
        found = LISTENING.search(first)
        if found is None:
            self.stop()
            raise RuntimeError(f"`{' '.join(command)}` did not start: {first!r} {log.read_text()[-2000:]}")
        self.url = found.group(1)

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)  # its clean shutdown path, as Ctrl-C
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdout:
            self.process.stdout.close()


# A stamp like the one the pipeline sends with each /reverify_batch request.
STAMP = b'{"config_hash":"0123456789ab","server":"mcqa","type":"mcqa","reverify_mode":"stateless"}'
# How every graded row's result starts: found by bytes, as parsing is client cost.
GRADED = b'{"status":200,"destination":'


@dataclass(frozen=True)
class Protocol:
    route: str  # /verify (one row a request) or /reverify_batch
    batch_rows: int = 1

    @property
    def label(self) -> str:
        return "one /verify per row" if self.route == "/verify" else f"{self.batch_rows} rows per {self.route} request"

    def rows_of(self, requests: Requests) -> list[bytes]:
        return requests.stored_rows if self.route == "/reverify_batch" else requests.verify_bodies

    def body(self, rows: list[bytes]) -> bytes:
        if self.route == "/reverify_batch":
            return b'{"stamp":' + STAMP + b',"rows":[' + b",".join(rows) + b"]}"
        return rows[0]

    def graded(self, answer: bytes, rows: int) -> int:
        if self.route == "/verify":
            return rows
        # /reverify_batch answers its results on the first line, the stored lines after it.
        return answer.partition(b"\n")[0].count(GRADED)

    @staticmethod
    def pipeline(url: str, concurrency: int) -> Protocol:
        """The protocol and rows per request the pipeline would use with this server at this concurrency."""

        async def probe() -> Protocol:
            async with aiohttp.ClientSession() as session, session.get(f"{url}/reverify_batch") as reply:
                rows = (await reply.json()).get("max_rows", 1) if reply.status == 200 else 1
            if rows > 1:
                return Protocol("/reverify_batch", batch_sizes({"server": rows}, concurrency)["server"])
            return Protocol("/verify")

        return asyncio.run(probe())


async def _drive(url: str, protocol: Protocol, rows_to_send: Sequence[bytes], rows: int, concurrency: int) -> int:
    """POST ``rows`` rows (cycling through ``rows_to_send``) as ``protocol`` does, ``concurrency`` rows in
    flight; the count of rows not graded (non-200)."""
    next_row = 0
    failures = 0
    requests_in_flight = max(1, concurrency // protocol.batch_rows)
    connector = aiohttp.TCPConnector(limit=requests_in_flight, limit_per_host=requests_in_flight)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def worker() -> None:
            nonlocal next_row, failures
            while next_row < rows:
                first = next_row
                next_row = min(rows, next_row + protocol.batch_rows)
                chosen = [rows_to_send[index % len(rows_to_send)] for index in range(first, next_row)]
                async with session.post(
                    f"{url}{protocol.route}", data=protocol.body(chosen), headers=JSON_HEADERS
                ) as reply:
                    answer = await reply.read()  # the whole answer, as any client must; not parsed
                    graded = protocol.graded(answer, len(chosen)) if reply.status == 200 else 0
                    failures += len(chosen) - graded

        await asyncio.gather(*(worker() for _ in range(requests_in_flight)))
    return failures


async def _time_once(
    url: str, protocol: Protocol, rows_to_send: Sequence[bytes], rows: int, concurrency: int, server_pid: int
) -> RawCapacity:
    server_cpu = tree_cpu_seconds(server_pid)
    client_cpu = time.process_time()
    busy, steal = machine_cpu_seconds()
    started = time.perf_counter()
    failures = await _drive(url, protocol, rows_to_send, rows, concurrency)
    seconds = time.perf_counter() - started
    busy_after, steal_after = machine_cpu_seconds()
    return RawCapacity(
        rows=rows,
        seconds=seconds,
        concurrency=concurrency,
        failures=failures,
        client_cpu_s=time.process_time() - client_cpu,
        server_cpu_s=tree_cpu_seconds(server_pid) - server_cpu,
        machine_busy_s=busy_after - busy,
        machine_steal_s=steal_after - steal,
        protocol=protocol,
    )


async def _warm_then_time(
    url: str, protocol: Protocol, rows_to_send: Sequence[bytes], rows: int, concurrency: int, pid: int, repeats: int
) -> list[RawCapacity]:
    await _drive(url, protocol, rows_to_send, min(WARMUP_ROWS, rows), concurrency)
    return [await _time_once(url, protocol, rows_to_send, rows, concurrency, pid) for _ in range(repeats)]


def measure_raw_capacity(
    server: ServeProcess, protocol: Protocol, requests: Requests, rows: int, concurrency: int, repeats: int = 3
) -> list[RawCapacity]:
    """``repeats`` timed passes after one warm-up; a capacity is best judged by the fastest (least disturbed)."""
    rows_to_send = protocol.rows_of(requests)
    with TreeSampler(server.pid) as sampler:
        results = asyncio.run(
            _warm_then_time(server.url, protocol, rows_to_send, rows, concurrency, server.pid, repeats)
        )
    for result in results:
        result.memory = sampler.report()
    return results
