"""The verifier's raw capacity: rows/s one built-in server sustains for a client that does nothing else.

`reverify serve` runs the server in the foreground; a minimal aiohttp client POSTs ready-made ``/verify``
bodies to it with a fixed number in flight. The bodies are the exact bytes ``reverify run`` sends (the same
join, ``build_verify_payload`` and ``orjson.dumps``), built before the clock starts, so the figure is the
ceiling the pipeline's own reading, joining and writing could at best reach.

The client speaks the protocol the pipeline would: ``/verify_batch`` with the pipeline's rows per request
when the server advertises it (see ``pipeline.verify_loop.batch_sizes``), else one ``/verify`` per row.
"""

from __future__ import annotations

import asyncio
import re
import selectors
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import orjson
from process_memory import TreeReport, TreeSampler, machine_cpu_seconds, tree_cpu_seconds

from reverify_assets.lib.payload import build_verify_payload
from reverify_assets.pipeline.verify_loop import batch_sizes

__all__ = ["RawCapacity", "ServeProcess", "build_payloads", "measure_raw_capacity", "pipeline_batch_rows"]

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
    batch_rows: int = 1  # rows per request: 1 is one /verify per row
    memory: TreeReport | None = None

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else 0.0


def build_payloads(inputs: Path, rollouts: Path, count: int) -> list[bytes]:
    """``/verify`` bodies of the first ``count`` rows of ``rollouts``, joined with their input rows by key."""
    wanted: dict[Key, dict[str, Any]] = {}
    with rollouts.open("rb") as fh:
        for line in fh:
            row = orjson.loads(line)
            wanted[(row["_ng_task_index"], row["_ng_rollout_index"])] = row
            if len(wanted) >= count:
                break
    bodies: list[bytes] = []
    with inputs.open("rb") as fh:
        for line in fh:
            row = orjson.loads(line)
            key = (row["_ng_task_index"], row["_ng_rollout_index"])
            rollout = wanted.pop(key, None)
            if rollout is not None:
                bodies.append(orjson.dumps(build_verify_payload(row, rollout, key)))
                if not wanted:
                    break
    if wanted:
        raise RuntimeError(f"{len(wanted)} rollouts of {rollouts} have no input row in {inputs}")
    return bodies


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


# How every row of a /verify_batch answer that was graded starts: found by bytes, as parsing is client cost.
BATCH_ROW_OK = b'{"status":200,"response":'


def pipeline_batch_rows(url: str, concurrency: int) -> int:
    """Rows per request the pipeline would send this server at this concurrency."""

    async def probe() -> int:
        async with aiohttp.ClientSession() as session, session.get(f"{url}/verify_batch") as reply:
            limit = (await reply.json()).get("max_rows", 1) if reply.status == 200 else 1
        return batch_sizes({"server": limit}, concurrency)["server"]

    return asyncio.run(probe())


async def _drive(url: str, bodies: Sequence[bytes], rows: int, concurrency: int, batch_rows: int) -> int:
    """POST ``rows`` bodies (cycling through ``bodies``), ``batch_rows`` per request, ``concurrency`` rows in
    flight; the count of rows not graded (non-200)."""
    batched = batch_rows > 1
    verify_url = f"{url}/verify_batch" if batched else f"{url}/verify"
    next_row = 0
    failures = 0
    requests_in_flight = max(1, concurrency // batch_rows)
    connector = aiohttp.TCPConnector(limit=requests_in_flight, limit_per_host=requests_in_flight)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def worker() -> None:
            nonlocal next_row, failures
            while next_row < rows:
                first = next_row
                next_row = min(rows, next_row + batch_rows)
                chosen = [bodies[index % len(bodies)] for index in range(first, next_row)]
                body = b'{"requests":[' + b",".join(chosen) + b"]}" if batched else chosen[0]
                async with session.post(verify_url, data=body, headers=JSON_HEADERS) as reply:
                    answer = await reply.read()  # the whole answer, as any client must; not parsed
                    if reply.status != 200:
                        failures += len(chosen)
                    elif batched:
                        failures += len(chosen) - answer.count(BATCH_ROW_OK)

        await asyncio.gather(*(worker() for _ in range(requests_in_flight)))
    return failures


async def _time_once(
    url: str, bodies: Sequence[bytes], rows: int, concurrency: int, batch_rows: int, server_pid: int
) -> RawCapacity:
    server_cpu = tree_cpu_seconds(server_pid)
    client_cpu = time.process_time()
    busy, steal = machine_cpu_seconds()
    started = time.perf_counter()
    failures = await _drive(url, bodies, rows, concurrency, batch_rows)
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
        batch_rows=batch_rows,
    )


async def _warm_then_time(
    url: str, bodies: Sequence[bytes], rows: int, concurrency: int, batch_rows: int, server_pid: int, repeats: int
) -> list[RawCapacity]:
    await _drive(url, bodies, min(WARMUP_ROWS, rows), concurrency, batch_rows)
    return [await _time_once(url, bodies, rows, concurrency, batch_rows, server_pid) for _ in range(repeats)]


def measure_raw_capacity(
    server: ServeProcess, bodies: Sequence[bytes], rows: int, concurrency: int, repeats: int = 3, batch_rows: int = 1
) -> list[RawCapacity]:
    """``repeats`` timed passes after one warm-up; a capacity is best judged by the fastest (least disturbed)."""
    with TreeSampler(server.pid) as sampler:
        results = asyncio.run(_warm_then_time(server.url, bodies, rows, concurrency, batch_rows, server.pid, repeats))
    for result in results:
        result.memory = sampler.report()
    return results
