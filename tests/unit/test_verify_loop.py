"""The verify loop with an in-memory client: every settled row lands once, even when the run breaks."""

from __future__ import annotations

import asyncio
from functools import partial
from pathlib import Path
from typing import Any

import orjson
import polars as pl
import pytest

from reverify_assets.errors import ReverifyError
from reverify_assets.files.names import RunFiles
from reverify_assets.rows.result_routing import Destination
from reverify_assets.rows.routed_row import RoutedRow
from reverify_assets.run import row_source, verify_loop
from reverify_assets.run.row_source import PairReader, ReadPair
from reverify_assets.run.settle_order import SettleOrder
from reverify_assets.run.verify_loop import verify_plan
from reverify_assets.verifier.client import Route, StoredRowOutcome, VerifyOutcome


class Client:
    def __init__(self, slow_task: int | None = None) -> None:
        self.slow_task = slow_task

    async def verify(self, body: bytes) -> VerifyOutcome:
        task = orjson.loads(body)["_ng_task_index"]
        await asyncio.sleep(0.05 if task == self.slow_task else 0)
        return VerifyOutcome({"reward": 1.0})


class Pairs:
    def __init__(self, unreadable: int | None = None, stored: dict[int, float | None] | None = None) -> None:
        self.unreadable = unreadable
        self.stored = stored or {}

    def read(self, key: tuple[int, int], *_: Any) -> ReadPair:
        if key[0] == self.unreadable:
            raise RuntimeError(f"row {key[0]} unreadable")
        payload = {"_ng_task_index": key[0], "_ng_rollout_index": key[1], "response": {}}
        return ReadPair(payload, self.stored.get(key[0], 0.0), stored_masked=False)


def plan(rows: int) -> pl.DataFrame:
    zeros = [0] * rows
    return pl.DataFrame(
        {
            "task": list(range(rows)),
            "rollout": zeros,
            "input_offset": zeros,
            "input_line": zeros,
            "rollout_offset": zeros,
            "rollout_line": zeros,
            "server": ["s"] * rows,
        }
    )


def written_tasks(files: RunFiles) -> list[int]:
    return [orjson.loads(line)["_ng_task_index"] for line in files.output.read_bytes().splitlines()]


def test_rows_that_settle_early_are_written_after_those_sent_before_them(tmp_path: Path) -> None:
    files = RunFiles.for_output(tmp_path / "out.jsonl")
    stats = asyncio.run(verify_plan(plan(30), Pairs(), {"s": Client(slow_task=3)}, files, {"s": {}}, concurrency=4))
    assert written_tasks(files) == list(range(30)), "the file needs no sorting"
    assert stats.verified == stats.to_output == 30 and stats.output_in_key_order is True


def test_a_slow_row_holds_the_others_back_only_so_long_and_order_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(verify_loop, "SettleOrder", partial(SettleOrder, max_held=4))
    files = RunFiles.for_output(tmp_path / "out.jsonl")
    stats = asyncio.run(verify_plan(plan(30), Pairs(), {"s": Client(slow_task=3)}, files, {"s": {}}, concurrency=4))
    tasks = written_tasks(files)
    assert sorted(tasks) == list(range(30)) and tasks.index(3) > 3, "rows after the slow one were written first"
    assert stats.verified == stats.to_output == 30 and stats.output_in_key_order is False


def test_rows_waiting_for_a_slow_one_are_written_once_they_waited_too_long(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No row settles after the others while the slow one is out: the writer's timer lets them go."""

    class VerySlowFirst(Client):
        async def verify(self, body: bytes) -> VerifyOutcome:
            if orjson.loads(body)["_ng_task_index"] == 0:
                await asyncio.sleep(1.0)
                assert written_tasks(files) != [], "the rows after it were written while it was out"
            return VerifyOutcome({"reward": 1.0})

    monkeypatch.setattr(verify_loop, "SettleOrder", partial(SettleOrder, max_wait_s=0.1))
    monkeypatch.setattr(verify_loop, "TICK_S", 0.02)
    files = RunFiles.for_output(tmp_path / "out.jsonl")
    stats = asyncio.run(verify_plan(plan(8), Pairs(), {"s": VerySlowFirst()}, files, {"s": {}}, concurrency=8))
    assert written_tasks(files) == [*range(1, 8), 0] and stats.output_in_key_order is False


@pytest.mark.parametrize("concurrency", [1, 8])
def test_rows_settled_before_an_error_are_kept(tmp_path: Path, concurrency: int) -> None:
    files = RunFiles.for_output(tmp_path / "out.jsonl")
    with pytest.raises(RuntimeError, match="row 50 unreadable"):
        asyncio.run(
            verify_plan(plan(100), Pairs(unreadable=50), {"s": Client()}, files, {"s": {}}, concurrency=concurrency)
        )
    tasks = written_tasks(files)
    assert len(tasks) == len(set(tasks)) and set(tasks) <= set(range(50))
    assert len(tasks) >= 50 - 2 * concurrency, "only rows still in flight may be missing"


class AlternatingClient(Client):
    """Odd tasks pass, even tasks fail, task 7 is masked."""

    async def verify(self, body: bytes) -> VerifyOutcome:
        task = orjson.loads(body)["_ng_task_index"]
        return VerifyOutcome({"reward": float(task % 2), **({"mask_sample": True} if task == 7 else {})})


def test_every_written_row_is_tallied_against_the_reward_its_rollout_stored(tmp_path: Path) -> None:
    # Tasks 0-9 stored a pass, 10-17 a fail, 18 nothing, 19 a partial reward.
    stored: dict[int, float | None] = {task: 1.0 if task < 10 else 0.0 for task in range(18)} | {18: None, 19: 0.5}
    files = RunFiles.for_output(tmp_path / "out.jsonl")
    stats = asyncio.run(
        verify_plan(plan(20), Pairs(stored=stored), {"s": AlternatingClient()}, files, {"s": {}}, concurrency=4)
    )
    flips = stats.stored_flips
    # Compared: 0-17 but masked 7; stored pass → odd tasks 1, 3, 5, 9 pass, 0, 2, 4, 6, 8 fail.
    assert (flips.both_pass, flips.pass_to_fail, flips.fail_to_pass, flips.both_fail) == (4, 5, 4, 4)
    assert (flips.masked, flips.unpaired, flips.non_binary, flips.compared) == (1, 1, 1, 18)
    assert flips.flip_rate is None, "a partial reward leaves the 2×2 table out, as `reverify compare` does"
    assert flips.mean_delta == pytest.approx((9 - 9.5) / 18)


class StoredRowsClient:
    """A ``/reverify_batch`` client: ``failing`` tasks get an error, ``stale`` ones a 409; the rest pass."""

    def __init__(self, failing: frozenset[int] = frozenset(), stale: frozenset[int] = frozenset()) -> None:
        self.failing, self.stale = failing, stale
        self.rows: list[bytes] = []
        self.batch_sizes: list[int] = []

    async def reverify_batch(self, rows: list[bytes], stamp: bytes) -> list[StoredRowOutcome]:
        self.rows += rows
        self.batch_sizes.append(len(rows))
        await asyncio.sleep(0)
        outcomes = []
        for row in rows:
            task = orjson.loads(row)[0]
            if task in self.stale:
                outcomes.append(StoredRowOutcome(error="HTTP 409: the rollout row is not its row", stale=True))
            elif task in self.failing:
                outcomes.append(StoredRowOutcome(error="HTTP 500: boom (after 4 attempts)"))
            else:
                line = orjson.dumps({"_ng_task_index": task, "reward": 1.0, "stamp": orjson.loads(stamp)}) + b"\n"
                outcomes.append(StoredRowOutcome(RoutedRow(Destination.OUTPUT, line, None, 1.0, False), 0.0))
        return outcomes


class StoredPairs(Pairs):
    def read_lines(self, input_at: tuple[int, int], rollout_at: tuple[int, int]) -> tuple[bytes, bytes]:
        return b'{"in":%d}' % input_at[0], b'{"out":%d}' % rollout_at[0]


def stored_plan(rows: int) -> pl.DataFrame:
    return plan(rows).with_columns(pl.col("task").alias("input_offset"), (pl.col("task") * 10).alias("rollout_offset"))


def test_batches_never_exceed_their_size_and_every_row_lands_once(tmp_path: Path) -> None:
    files = RunFiles.for_output(tmp_path / "out.jsonl")
    client = StoredRowsClient()
    run = verify_plan(
        stored_plan(100),
        StoredPairs(),
        {"s": client},
        files,
        {"s": {}},
        concurrency=16,
        batch_rows={"s": 4},
        routes={"s": Route.STORED_ROWS},
    )
    stats = asyncio.run(run)
    assert sorted(written_tasks(files)) == list(range(100)) and stats.verified == 100
    assert max(client.batch_sizes) == 4 and sum(client.batch_sizes) == 100


def test_a_server_without_stored_rows_gets_one_row_a_request_whatever_its_batch_size(tmp_path: Path) -> None:
    files = RunFiles.for_output(tmp_path / "out.jsonl")
    stats = asyncio.run(
        verify_plan(plan(20), Pairs(), {"s": Client()}, files, {"s": {}}, concurrency=8, batch_rows={"s": 4})
    )
    assert sorted(written_tasks(files)) == list(range(20)) and stats.verified == 20


def test_half_filled_batches_of_many_servers_cannot_stall_the_run(tmp_path: Path) -> None:
    servers = [f"s{index}" for index in range(5)]
    rows = stored_plan(60).with_columns(pl.Series("server", [servers[task % 5] for task in range(60)]))
    clients = {server: StoredRowsClient() for server in servers}
    files = RunFiles.for_output(tmp_path / "out.jsonl")
    # Room for 2 × 2 rows, while five servers each wait for 16 rows to fill a batch.
    run = verify_plan(
        rows,
        StoredPairs(),
        clients,
        files,
        {server: {} for server in servers},
        concurrency=2,
        batch_rows=dict.fromkeys(servers, 16),
        routes=dict.fromkeys(servers, Route.STORED_ROWS),
    )
    stats = asyncio.run(asyncio.wait_for(run, timeout=60))
    assert sorted(written_tasks(files)) == list(range(60)) and stats.verified == 60


def test_stored_rows_go_out_as_their_two_lines_and_come_back_as_the_lines_to_store(tmp_path: Path) -> None:
    files = RunFiles.for_output(tmp_path / "out.jsonl")
    client = StoredRowsClient(failing=frozenset({4}))
    stats = asyncio.run(
        verify_plan(
            stored_plan(10),
            StoredPairs(stored={4: 1.0}),
            {"s": client},
            files,
            {"s": {"config_hash": "c"}},
            concurrency=8,
            batch_rows={"s": 2},
            routes={"s": Route.STORED_ROWS},
        )
    )
    assert sorted(client.rows) == sorted(b'[%d,0,{"in":%d},{"out":%d}]' % (task, task, 10 * task) for task in range(10))
    assert sorted(written_tasks(files)) == [task for task in range(10) if task != 4]
    assert {orjson.loads(line)["stamp"]["config_hash"] for line in files.output.read_bytes().splitlines()} == {"c"}
    # The CLI reads the failed row's pair itself and stores it as a failed /verify, with its stored reward.
    (failed,) = [orjson.loads(line) for line in files.sidecar.read_bytes().splitlines()]
    assert (failed["_ng_task_index"], failed["_ng_failure_class"]) == (4, "verify_failed")
    assert failed["_ng_failure_message"] == "HTTP 500: boom (after 4 attempts)"
    assert (stats.to_output, stats.to_sidecar, stats.stored_flips.fail_to_pass) == (9, 1, 9)


@pytest.mark.parametrize(
    ("pairs", "error"),
    [
        (StoredPairs(), "could not make a verify request of the stored rows of \\(task 5, rollout 0\\)"),
        (StoredPairs(unreadable=5), "row 5 unreadable"),  # the CLI's own reading names the file and line
    ],
)
def test_a_stale_stored_row_stops_the_run_and_keeps_what_settled(tmp_path: Path, pairs: Pairs, error: str) -> None:
    files = RunFiles.for_output(tmp_path / "out.jsonl")
    run = verify_plan(
        stored_plan(40),
        pairs,
        {"s": StoredRowsClient(stale=frozenset({5}))},
        files,
        {"s": {}},
        concurrency=4,
        batch_rows={"s": 1},
        routes={"s": Route.STORED_ROWS},
    )
    with pytest.raises((ReverifyError, RuntimeError), match=error):
        asyncio.run(run)
    tasks = written_tasks(files)
    assert 5 not in tasks and len(tasks) == len(set(tasks)), "nothing stored for the stale row, nothing twice"


def test_pair_reader_reads_the_stored_lines_at_their_offsets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    inputs, rollouts = tmp_path / "inputs.jsonl", tmp_path / "rollouts.jsonl"
    inputs.write_bytes(b'{"i":0}\n{"i":1}\r\n')
    rollouts.write_bytes(b'{"r":0}\n{"r":1}\n{"r":2}')
    # A task's rollouts share their input line, which is read once; then another input, then the first again.
    reads = [((0, 1), (16, 3)), ((0, 1), (0, 1)), ((8, 2), (8, 2)), ((0, 1), (8, 2))]
    read_at: list[int] = []
    pread_line = row_source.pread_line

    def counted(fd: int, offset: int) -> bytes:
        read_at.append(offset)
        return pread_line(fd, offset)

    monkeypatch.setattr(row_source, "pread_line", counted)
    with PairReader(inputs, rollouts) as pairs:
        lines = [pairs.read_lines(input_at, rollout_at) for input_at, rollout_at in reads]
    assert lines == [
        (b'{"i":0}', b'{"r":2}'),
        (b'{"i":0}', b'{"r":0}'),
        (b'{"i":1}', b'{"r":1}'),
        (b'{"i":0}', b'{"r":1}'),
    ]
    assert read_at == [0, 16, 0, 8, 8, 0, 8]  # inputs at 0, 0, 8, 0: the repeated one read once


class VerifyBatchClient(Client):
    """A NeMo Gym server with ``/verify_batch``: the rows' own verify requests, several a request."""

    def __init__(self) -> None:
        super().__init__()
        self.batch_sizes: list[int] = []

    async def verify(self, body: bytes) -> VerifyOutcome:
        raise AssertionError("a server with /verify_batch gets no /verify")

    async def verify_batch(self, bodies: list[bytes]) -> list[VerifyOutcome]:
        self.batch_sizes.append(len(bodies))
        tasks = [orjson.loads(body)["_ng_task_index"] for body in bodies]
        return [VerifyOutcome({"reward": 1.0}) if task % 7 else VerifyOutcome(None, "HTTP 500: boom") for task in tasks]


def test_verify_requests_go_several_to_a_verify_batch_and_each_row_settles_alone(tmp_path: Path) -> None:
    files = RunFiles.for_output(tmp_path / "out.jsonl")
    client = VerifyBatchClient()
    run = verify_plan(
        plan(50),
        Pairs(),
        {"s": client},
        files,
        {"s": {}},
        concurrency=16,
        batch_rows={"s": 4},
        routes={"s": Route.VERIFY_BATCH},
    )
    stats = asyncio.run(run)
    failed = [task for task in range(50) if task % 7 == 0]
    assert sorted(written_tasks(files)) == [task for task in range(50) if task not in failed]
    sidecar = [orjson.loads(line) for line in files.sidecar.read_bytes().splitlines()]
    assert sorted(row["_ng_task_index"] for row in sidecar) == failed, "a failed row fails alone"
    assert {row["_ng_failure_class"] for row in sidecar} == {"verify_failed"}
    assert stats.verified == 50 and max(client.batch_sizes) == 4 and sum(client.batch_sizes) == 50
