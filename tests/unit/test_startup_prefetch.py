"""`reverify run`'s start-up: work started ahead (scans, join, fingerprints, servers) and taken later."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path

import orjson
import polars as pl
import pytest
import xxhash

from reverify_assets.errors import InputError
from reverify_assets.keys import scan_process as key_scan_process
from reverify_assets.keys.key_columns import FilePart, KeyColumns
from reverify_assets.processes import prefetch
from reverify_assets.processes.prefetch import PrefetchedWork, start_import
from reverify_assets.run import startup_prefetch
from reverify_assets.run.preparation import (
    InputsIndex,
    VerifierSetup,
    index_rollouts,
    inputs_index_frame,
    join_and_route,
    load_verifier_setup,
)
from reverify_assets.run.startup_prefetch import (
    PrefetchedInputs,
    hand_over_plan,
    read_plan,
    scan_inputs,
    scan_rollouts,
    take_prefetched_plan,
    write_inputs_index,
)

MCQA_CONFIG = Path(__file__).resolve().parents[2] / "configs" / "mcqa.yaml"


def write_rows(path: Path, keys: list[tuple[int, int]], **extra: object) -> Path:
    path.write_bytes(
        b"".join(orjson.dumps({"_ng_task_index": t, "_ng_rollout_index": r, **extra}) + b"\n" for t, r in keys)
    )
    return path


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    keys = [(0, 0), (0, 1), (1, 0)]
    return write_rows(tmp_path / "inputs.jsonl", keys), write_rows(tmp_path / "rollouts.jsonl", keys, response={})


@pytest.fixture
def work() -> PrefetchedWork:
    """What one command's start-up prefetches, for the assets of its run to take."""
    return PrefetchedWork()


@pytest.fixture
def setup() -> VerifierSetup:
    return load_verifier_setup([MCQA_CONFIG], [])


def test_a_started_result_is_taken_once(tmp_path: Path) -> None:
    path, work = write_rows(tmp_path / "f.jsonl", [(0, 0)]), PrefetchedWork()
    work.start("k", [path], lambda: 42)
    assert PrefetchedWork().take("k") is None  # another command's, or a run's with no command
    taken = work.take("k")
    assert taken is not None and taken.result() == 42
    assert work.take("k") is None


def test_a_result_made_from_a_file_changed_since_is_not_handed_out(tmp_path: Path) -> None:
    path, work = write_rows(tmp_path / "f.jsonl", [(0, 0)]), PrefetchedWork()
    work.start("k", [path], lambda: 42).result()
    write_rows(path, [(0, 0), (0, 1)])
    assert work.take("k") is None


def test_an_error_reaches_whoever_takes_the_result(tmp_path: Path) -> None:
    bad_row = InputError("bad row", path=tmp_path / "r.jsonl", line=3, key="(task 1, rollout 2)")

    def fail() -> None:
        raise bad_row

    work = PrefetchedWork()
    work.start("k", [], fail)
    taken = work.take("k")
    assert taken is not None
    with pytest.raises(InputError) as caught:
        taken.result()
    assert caught.value is bad_row


def test_file_digest_takes_the_prefetched_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Chunks smaller than the file, and not dividing it: the digest is the whole file's all the same.
    monkeypatch.setattr(prefetch, "ON_THE_SPOT_CHUNK_BYTES", 1000)
    monkeypatch.setattr(prefetch, "AHEAD_CHUNK_BYTES", 3001)
    path = write_rows(tmp_path / "f.jsonl", [(0, 0)] * 1000)
    assert path.stat().st_size > 10 * 3001
    expected = xxhash.xxh3_128(path.read_bytes()).digest()
    work = PrefetchedWork()
    assert work.file_digest(path) == expected
    key = work.start_file_digest(path)
    assert work.file_digest(path) == expected
    assert work.take(key) is None  # consumed


def test_the_assets_take_the_prefetched_scans_and_plan(
    tmp_path: Path,
    files: tuple[Path, Path],
    setup: VerifierSetup,
    monkeypatch: pytest.MonkeyPatch,
    work: PrefetchedWork,
) -> None:
    inputs, rollouts = files
    made: list[InputsIndex] = []
    scan, from_process = startup_prefetch.index_inputs, startup_prefetch.inputs_index_of

    def counted(path: Path, *, reject_duplicates: bool = True) -> InputsIndex:
        made.append(scan(path, reject_duplicates=reject_duplicates))
        return made[-1]

    def counted_from_process(path: Path, columns: KeyColumns | None) -> InputsIndex:
        made.append(from_process(path, columns))
        return made[-1]

    monkeypatch.setattr(startup_prefetch, "index_inputs", counted)
    monkeypatch.setattr(startup_prefetch, "inputs_index_of", counted_from_process)
    scratch = tmp_path / "work"
    target = scratch / "run" / "materialized_inputs.parquet"
    target.parent.mkdir(parents=True)
    with PrefetchedInputs(inputs, rollouts, limit=None, join_with=setup, work=work, index_folder=scratch) as prefetched:
        prefetched.wait()
        assert write_inputs_index(inputs, target, work) == (3, [{}])
        assert [path.name for path in scratch.iterdir()] == ["run"], "its files taken, the start-up's folder went"
        assert pl.read_parquet(target).equals(inputs_index_frame(made[0]))
        assert scan_rollouts(rollouts, work).rows == 3
        plan = take_prefetched_plan(work, inputs, rollouts, None, setup.config_hash)
        assert plan is not None and plan.height == 3
    assert len(made) == 1
    assert [path.name for path in scratch.iterdir()] == ["run"]  # the start-up's folder is gone
    write_inputs_index(inputs, target, work)  # nothing prefetched any more: scanned again
    assert len(made) == 2


def test_without_the_join_the_inputs_index_is_handed_over_as_a_frame(
    files: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, work: PrefetchedWork
) -> None:
    inputs, rollouts = files
    scans: list[Path] = []
    scan = startup_prefetch.inputs_index_of

    def counted(path: Path, columns: KeyColumns | None) -> InputsIndex:
        scans.append(path)
        return scan(path, columns)

    monkeypatch.setattr(startup_prefetch, "inputs_index_of", counted)
    scratch = tmp_path / "work"
    scratch.mkdir()
    with PrefetchedInputs(inputs, rollouts, limit=None, join_with=None, work=work, index_folder=scratch) as prefetched:
        prefetched.wait()
        assert list(scratch.iterdir()) == [], "nothing written there is left once the start-up is over"
        assert work.take(("inputs index file", inputs.resolve())) is None
        assert scan_inputs(inputs, work).keys.rows == 3
    assert scans == [inputs]  # the prefetched frame was taken, not scanned again


def test_the_start_up_folder_goes_when_the_start_up_fails_to_start(
    files: tuple[Path, Path],
    setup: VerifierSetup,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    work: PrefetchedWork,
) -> None:
    def vanished(path: Path) -> object:
        raise FileNotFoundError(path)

    monkeypatch.setattr(PrefetchedWork, "start_file_digest", lambda self, path: vanished(path))
    folder = tmp_path / "work"
    folder.mkdir()
    with pytest.raises(FileNotFoundError):
        with PrefetchedInputs(*files, limit=None, join_with=setup, work=work, index_folder=folder):
            pass
    assert list(folder.iterdir()) == []


def test_an_interrupted_start_up_removes_its_folder_once_nothing_writes_into_it(
    files: tuple[Path, Path],
    setup: VerifierSetup,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    work: PrefetchedWork,
) -> None:
    writing, written = threading.Event(), threading.Event()
    write = startup_prefetch.write_parquet_atomic

    def slow_write(frame: pl.DataFrame, path: Path) -> None:
        writing.set()
        time.sleep(0.3)  # the inputs index at a million rows, say, while Ctrl-C unwinds the start-up
        write(frame, path)
        written.set()

    monkeypatch.setattr(startup_prefetch, "write_parquet_atomic", slow_write)
    folder = tmp_path / "work"
    folder.mkdir()
    with pytest.raises(KeyboardInterrupt):
        with PrefetchedInputs(*files, limit=None, join_with=setup, work=work, index_folder=folder):
            assert writing.wait(timeout=60)
            raise KeyboardInterrupt
    assert written.is_set(), "the folder was removed while a file was being written into it"
    assert list(folder.iterdir()) == []


def test_start_up_folders_of_gone_processes_on_this_machine_are_removed(
    files: tuple[Path, Path], setup: VerifierSetup, tmp_path: Path, work: PrefetchedWork
) -> None:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    host = socket.gethostname()
    folder = tmp_path / "work"
    kept = [f"start-up-{os.getpid()}-{host}-a", f"start-up-{gone.stdout.strip()}-another.host-b", "start-up-x"]
    for name in [*kept, f"start-up-{gone.stdout.strip()}-{host}-c"]:
        (folder / name).mkdir(parents=True)
        (folder / name / "materialized_inputs.parquet").write_bytes(b"left behind")
    with PrefetchedInputs(*files, limit=None, join_with=setup, work=work, index_folder=folder) as prefetched:
        prefetched.wait()
    assert sorted(path.name for path in folder.iterdir()) == sorted(kept)


def test_an_empty_plan_names_servers_by_an_enum_too(tmp_path: Path, setup: VerifierSetup, work: PrefetchedWork) -> None:
    inputs, rollouts = write_rows(tmp_path / "inputs.jsonl", []), write_rows(tmp_path / "rollouts.jsonl", [])
    plan = join_and_route(scan_inputs(inputs, work), scan_rollouts(rollouts, work), setup.topology)
    assert plan.is_empty() and plan.schema["server"] == pl.Enum([])


def test_an_index_folder_left_by_a_failed_start_up_is_removed(
    tmp_path: Path, setup: VerifierSetup, work: PrefetchedWork
) -> None:
    inputs = write_rows(tmp_path / "inputs.jsonl", [(0, 0)])
    orphan = write_rows(tmp_path / "rollouts.jsonl", [(9, 9)], response={})
    folder = tmp_path / "work"
    folder.mkdir()
    with pytest.raises(InputError) as caught:
        with PrefetchedInputs(
            inputs, orphan, limit=None, join_with=setup, work=work, index_folder=folder
        ) as prefetched:
            prefetched.wait()
    # The rollout without an input row:
    assert (caught.value.path, caught.value.line, caught.value.key) == (orphan, 1, "(task 9, rollout 9)")
    assert list(folder.iterdir()) == []


def test_the_prefetched_rollouts_come_in_key_order_and_plan_as_fresh_scans_do(
    tmp_path: Path, setup: VerifierSetup, work: PrefetchedWork
) -> None:
    keys = [(2, 0), (0, 1), (1, 3), (0, 0)]
    inputs = write_rows(tmp_path / "inputs.jsonl", sorted(keys))
    rollouts = write_rows(tmp_path / "rollouts.jsonl", keys, response={})
    fresh = scan_rollouts(rollouts, work)
    expected_plan = join_and_route(scan_inputs(inputs, work), fresh, setup.topology)
    with PrefetchedInputs(inputs, rollouts, limit=None, join_with=setup, work=work) as prefetched:
        prefetched.wait()
        prefetched_rollouts = scan_rollouts(rollouts, work).frame
        plan = take_prefetched_plan(work, inputs, rollouts, None, setup.config_hash)
    assert prefetched_rollouts.equals(fresh.frame.sort("task", "rollout"))
    assert plan is not None and plan.equals(expected_plan)


def test_the_plan_names_servers_by_an_enum_that_survives_its_parquet_file(
    tmp_path: Path, files: tuple[Path, Path], setup: VerifierSetup, work: PrefetchedWork
) -> None:
    inputs, rollouts = files
    plan = join_and_route(scan_inputs(inputs, work), scan_rollouts(rollouts, work), setup.topology)
    assert plan.schema["server"] == pl.Enum(["mcqa"]) and plan["server"].to_list() == ["mcqa"] * 3
    plan.write_parquet(tmp_path / "plan.parquet")
    assert pl.read_parquet(tmp_path / "plan.parquet").equals(plan)


def test_a_scan_with_other_options_is_not_taken(
    files: tuple[Path, Path], setup: VerifierSetup, work: PrefetchedWork
) -> None:
    inputs, rollouts = files
    with PrefetchedInputs(inputs, rollouts, limit=None, join_with=None, work=work) as prefetched:
        prefetched.wait()
        assert scan_rollouts(rollouts, work, limit=2).rows == 2
        assert take_prefetched_plan(work, inputs, rollouts, None, setup.config_hash) is None  # judge recovery: no join


def test_errors_come_in_the_order_the_assets_would_meet_them(
    files: tuple[Path, Path], setup: VerifierSetup, tmp_path: Path, work: PrefetchedWork
) -> None:
    inputs, rollouts = files
    write_rows(rollouts, [(0, 0), (0, 0)], response={})
    with PrefetchedInputs(inputs, rollouts, limit=None, join_with=setup, work=work) as prefetched:
        with pytest.raises(InputError) as caught:
            prefetched.wait()
        # A duplicate key:
        assert (caught.value.path, caught.value.line, caught.value.key) == (rollouts, 1, "(task 0, rollout 0)")
    inputs.write_bytes(b"{}\n")
    with PrefetchedInputs(inputs, rollouts, limit=None, join_with=setup, work=work) as prefetched:
        with pytest.raises(InputError) as caught:
            prefetched.wait()
        assert (caught.value.path, caught.value.line, caught.value.key) == (inputs, 1, None)  # a row without a key
    write_rows(inputs, [(0, 0)])
    orphan = write_rows(tmp_path / "orphan.jsonl", [(7, 0)], response={})
    with PrefetchedInputs(inputs, orphan, limit=None, join_with=setup, work=work) as prefetched:
        with pytest.raises(InputError) as caught:
            prefetched.wait()
        # A rollout without an input row:
        assert (caught.value.path, caught.value.line, caught.value.key) == (orphan, 1, "(task 7, rollout 0)")


def test_raise_if_failed_raises_what_is_known(
    files: tuple[Path, Path], setup: VerifierSetup, work: PrefetchedWork
) -> None:
    inputs, rollouts = files
    inputs.write_bytes(b"not json\n")
    with PrefetchedInputs(inputs, rollouts, limit=None, join_with=setup, work=work) as prefetched:
        with pytest.raises(InputError) as caught:
            prefetched.wait()
        assert (caught.value.path, caught.value.line, caught.value.key) == (inputs, 1, None)
        with pytest.raises(InputError) as caught:
            prefetched.raise_if_failed()
        assert (caught.value.path, caught.value.line, caught.value.key) == (inputs, 1, None)


def test_wait_for_raises_a_scan_error_without_waiting_for_the_other_work(
    files: tuple[Path, Path], setup: VerifierSetup, work: PrefetchedWork
) -> None:
    inputs, rollouts = files
    inputs.write_bytes(b"not json\n")
    never_done: Future[None] = Future()
    with PrefetchedInputs(inputs, rollouts, limit=None, join_with=setup, work=work) as prefetched:
        with pytest.raises(InputError) as caught:
            prefetched.wait_for(never_done)
        assert (caught.value.path, caught.value.line, caught.value.key) == (inputs, 1, None)


@pytest.mark.timeout(20)
def test_wait_for_raises_an_error_found_before_it_was_called(files: tuple[Path, Path], work: PrefetchedWork) -> None:
    inputs, rollouts = files
    rollouts.write_bytes(b"not json\n")
    with PrefetchedInputs(inputs, rollouts, limit=None, join_with=None, work=work) as prefetched:
        with pytest.raises(InputError) as caught:
            prefetched.wait()  # every check has finished now, one of them failed
        assert (caught.value.path, caught.value.line, caught.value.key) == (rollouts, 1, None)
        with pytest.raises(InputError) as caught:
            prefetched.wait_for(Future())  # waited on nothing left to finish: hung before the fix
        assert (caught.value.path, caught.value.line, caught.value.key) == (rollouts, 1, None)


def test_wait_for_hands_over_the_other_work_and_its_error(
    files: tuple[Path, Path], setup: VerifierSetup, work: PrefetchedWork
) -> None:
    with PrefetchedInputs(*files, limit=None, join_with=setup, work=work) as prefetched:
        assert prefetched.wait_for(start_import("reverify_assets.keys.rollout_keys")) is None
        with pytest.raises(ModuleNotFoundError, match=r"reverify_assets\.no_such_module"):
            prefetched.wait_for(start_import("reverify_assets.no_such_module"))
        prefetched.wait()


def test_the_verify_step_takes_the_plan_its_process_wrote_once_then_reads_the_file(
    tmp_path: Path, work: PrefetchedWork
) -> None:
    plan, path = pl.DataFrame({"task": [0, 1], "rollout": [0, 0]}), tmp_path / "plan.parquet"
    plan.write_parquet(path)
    hand_over_plan(work, path, plan)
    assert read_plan(work, path) is plan
    again = read_plan(work, path)
    assert again is not plan and again.equals(plan)
    hand_over_plan(work, path, plan)
    changed = pl.DataFrame({"task": [5], "rollout": [1]})
    changed.write_parquet(path)  # a newer plan written after the hand-over: the file wins
    assert read_plan(work, path).equals(changed)
    other = tmp_path / "other.parquet"
    plan.write_parquet(other)
    hand_over_plan(work, path, changed)
    hand_over_plan(work, other, plan)  # replaces the first: a process keeps one plan at most
    assert read_plan(work, other) is plan
    from_file = read_plan(work, path)
    assert from_file is not changed and from_file.equals(changed)


def test_this_thread_keeps_its_priority(files: tuple[Path, Path], work: PrefetchedWork) -> None:
    before = os.getpriority(os.PRIO_PROCESS, 0)
    with PrefetchedInputs(*files, limit=None, join_with=None, work=work) as prefetched:
        prefetched.wait()
    assert os.getpriority(os.PRIO_PROCESS, 0) == before


@pytest.mark.parametrize("fault", ["no start", "exit", "no summary", "short"])
def test_a_scan_process_that_fails_leaves_the_scan_to_this_process(
    files: tuple[Path, Path], setup: VerifierSetup, monkeypatch: pytest.MonkeyPatch, fault: str, work: PrefetchedWork
) -> None:
    inputs, rollouts = files
    expected_plan = join_and_route(scan_inputs(inputs, work), scan_rollouts(rollouts, work), setup.topology)
    started = key_scan_process.ScanProcess.__init__
    in_process: list[Path] = []
    scan_here = {name: getattr(startup_prefetch, name) for name in ("index_inputs", "index_rollouts")}

    def broken(
        self: key_scan_process.ScanProcess, kind: str, path: Path, limit: int | None, output: Path, **options: Path
    ) -> None:
        started(self, kind, path, limit, output, **options)
        self._process.wait()
        if fault == "no summary":
            key_scan_process.summary_of(output).unlink()
        else:
            output.write_bytes(output.read_bytes()[:-4])  # a column shorter than the rows the summary counts

    def counted(name: str) -> Callable[..., object]:
        def scan(path: Path, **options: object) -> object:
            in_process.append(path)
            return scan_here[name](path, **options)

        return scan

    for name in scan_here:
        monkeypatch.setattr(startup_prefetch, name, counted(name))
    if fault == "no start":
        monkeypatch.setattr(sys, "executable", str(inputs.parent / "no-such-python"))
    elif fault == "exit":
        monkeypatch.setattr(sys, "executable", "false")  # a process that exits 1 at once
    else:
        monkeypatch.setattr(key_scan_process.ScanProcess, "__init__", broken)
    with PrefetchedInputs(inputs, rollouts, limit=None, join_with=setup, work=work) as prefetched:
        prefetched.wait()
        plan = take_prefetched_plan(work, inputs, rollouts, None, setup.config_hash)
    assert plan is not None and plan.equals(expected_plan)
    assert sorted(in_process) == sorted([inputs, rollouts])


@pytest.mark.parametrize("bad_line", [None, 2, 9])
def test_a_big_rollouts_file_is_scanned_in_halves_as_it_is_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, work: PrefetchedWork, bad_line: int | None
) -> None:
    """Two processes, one a half: the same index, or the same error (naming the line) as one scan of the file."""
    keys = [(task, rollout) for task in range(5) for rollout in range(2)]
    inputs = write_rows(tmp_path / "inputs.jsonl", sorted(keys))
    rollouts = write_rows(tmp_path / "rollouts.jsonl", keys[::-1], response={})
    if bad_line is not None:
        lines = rollouts.read_bytes().splitlines(keepends=True)
        lines[bad_line - 1] = b"{bad\n"
        rollouts.write_bytes(b"".join(lines))
    parts: list[str] = []

    class Recorded(key_scan_process.ScanProcess):
        def __init__(self, kind: str, *arguments: object, **options: object) -> None:
            parts.append(f"{kind} {options.get('part', 'whole')}")
            super().__init__(kind, *arguments, **options)  # type: ignore[arg-type]

    monkeypatch.setattr(startup_prefetch, "SPLIT_ROLLOUTS_BYTES", 0)
    monkeypatch.setattr(startup_prefetch, "ScanProcess", Recorded)

    def prefetched_rollouts() -> pl.DataFrame:
        with PrefetchedInputs(inputs, rollouts, limit=None, join_with=None, work=work) as prefetched:
            prefetched.wait()
            return scan_rollouts(rollouts, work).frame

    if bad_line is None:
        expected = index_rollouts(rollouts).frame.sort("task", "rollout")
        assert prefetched_rollouts().equals(expected)
    else:
        with pytest.raises(InputError) as caught:
            prefetched_rollouts()
        assert (caught.value.path, caught.value.line, caught.value.key) == (rollouts, bad_line, None)
    assert parts == ["inputs whole", *(f"rollouts {half}" for half in FilePart.halves(rollouts))]


@pytest.mark.parametrize(
    ("rows", "line", "key"),
    [
        ([b'{"_ng_task_index": 0, "_ng_rollout_index": 0, "response": {}}', b"{bad"], 2, None),  # malformed
        ([b'{"_ng_task_index": 0, "_ng_rollout_index": 0, "response": {}}'] * 2, 1, "(task 0, rollout 0)"),  # twice
        ([b'{"_ng_task_index": 0, "_ng_rollout_index": 0}'], 1, "(task 0, rollout 0)"),  # no response
    ],
    ids=["malformed", "duplicate key", "no response"],
)
def test_the_scan_process_path_reports_the_exact_scans_errors(
    tmp_path: Path, setup: VerifierSetup, rows: list[bytes], line: int, key: str | None, work: PrefetchedWork
) -> None:
    inputs = write_rows(tmp_path / "inputs.jsonl", [(0, 0)])
    rollouts = tmp_path / "rollouts.jsonl"
    rollouts.write_bytes(b"".join(row + b"\n" for row in rows))
    with pytest.raises(InputError) as caught:
        with PrefetchedInputs(inputs, rollouts, limit=None, join_with=setup, work=work) as prefetched:
            prefetched.wait()
    assert (caught.value.path, caught.value.line, caught.value.key) == (rollouts, line, key)


def test_scan_processes_still_running_are_stopped_on_exit(
    files: tuple[Path, Path], setup: VerifierSetup, monkeypatch: pytest.MonkeyPatch, work: PrefetchedWork
) -> None:
    processes: list[subprocess.Popen[bytes]] = []
    started = key_scan_process.ScanProcess.__init__

    def slow(
        self: key_scan_process.ScanProcess, kind: str, path: Path, limit: int | None, output: Path, **options: Path
    ) -> None:
        started(self, kind, path, limit, output, **options)
        self._process.wait()
        self._process = subprocess.Popen(["sleep", "60"])
        processes.append(self._process)

    scanned_here: list[Path] = []
    monkeypatch.setattr(key_scan_process.ScanProcess, "__init__", slow)
    monkeypatch.setattr(startup_prefetch, "index_inputs", lambda path, **_: scanned_here.append(path))
    monkeypatch.setattr(startup_prefetch, "index_rollouts", lambda path, **_: scanned_here.append(path))
    with PrefetchedInputs(*files, limit=None, join_with=setup, work=work):
        pass
    assert [process.poll() for process in processes] == [-signal.SIGKILL] * 2
    for thread in threading.enumerate():
        if thread.name.startswith("prefetch"):
            thread.join(timeout=10)
    assert scanned_here == []  # a stopped scan is not done again in this process


def test_a_scan_stopped_while_its_answer_is_read_is_not_a_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_rows(tmp_path / "rollouts.jsonl", [(0, 0)], response={})
    scan = key_scan_process.ScanProcess("rollouts", path, None, tmp_path / "rollouts.keys")

    def folder_removed(output: Path) -> None:
        scan.stop()  # as the start-up's exit does, from another thread
        raise FileNotFoundError(output)

    monkeypatch.setattr(key_scan_process, "read_columns", folder_removed)
    with pytest.raises(key_scan_process.ScanStopped):  # not ScanFailed, which would scan again in-process
        scan.columns()
