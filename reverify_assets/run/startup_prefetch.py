"""``reverify run``'s start-up: the key scans, the join and the sources' fingerprints, started as soon as the
command's options are known, so that they overlap the Dagster import and instance set-up. The scans run in
processes of their own (``keys.scan_process``), the rest in threads.

The work is started on the command's ``PrefetchedWork``, which its Dagster run is given as a resource: the
assets that need it then take its results instead of doing the work again (``scan_inputs``, ``scan_rollouts``,
``write_inputs_index``, ``take_prefetched_plan``), and the verify step takes the plan the run's plan step
wrote (``read_plan``). A run launched from the UI is given a ``PrefetchedWork`` of its own, with nothing
started: each asset then does its work on the spot.
"""

from __future__ import annotations

import logging
import os
import queue
import shutil
import socket
import tempfile
from collections.abc import Callable, Hashable
from concurrent import futures
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import polars as pl

from reverify_assets.errors import OutputError
from reverify_assets.files.atomic import move_into_place, write_parquet_atomic
from reverify_assets.keys.key_columns import WHOLE_FILE, FilePart, KeyColumns
from reverify_assets.keys.key_index import KeyIndex
from reverify_assets.keys.rollout_identity import allows_prompt_mismatch
from reverify_assets.keys.scan_process import ScanFailed, ScanProcess
from reverify_assets.keys.sorted_keys import take_sorted_by_key
from reverify_assets.processes.prefetch import PrefetchedWork
from reverify_assets.run.preparation import (
    InputsIndex,
    VerifierSetup,
    index_inputs,
    index_rollouts,
    inputs_index_frame,
    inputs_index_of,
    join_and_route,
    rollouts_index_of,
)

T = TypeVar("T")
log = logging.getLogger("reverify")
HANDED_OVER_PLAN = ("plan file",)
START_UP_PREFIX = "start-up-"
# How long an interrupted start-up waits for the thread writing the inputs index into its folder before it
# removes the folder: the thread is done at once, but when its scan process failed and it scans in-process.
WRITER_STOP_WAIT_S = 5.0
# A rollouts file this big is scanned in two halves, by two processes: below it, the second process's start
# (0.15 s of CPU) costs more than it saves.
SPLIT_ROLLOUTS_BYTES = 64 << 20


def scan_inputs(path: Path, work: PrefetchedWork, *, reject_duplicates: bool = True) -> InputsIndex:
    """The inputs index: the start-up's if it made one (without the join) of the file as it is, else scanned now."""
    if reject_duplicates and (prefetched := _take_prefetched(work, _scan_key("inputs", path))) is not None:
        return prefetched
    return index_inputs(path, reject_duplicates=reject_duplicates)


@dataclass(frozen=True)
class WrittenInputsIndex:
    """The inputs index as the start-up wrote it (see ``PrefetchedInputs``), for the asset to move into place."""

    file: Path
    rows: int
    routes: list[dict[str, Any]]


def write_inputs_index(path: Path, target: Path, work: PrefetchedWork) -> tuple[int, list[dict[str, Any]]]:
    """Write the key index of the inputs file ``path`` to ``target``: the start-up's file moved there if it made
    one, else a scan's. Returns its rows and routes."""
    written: WrittenInputsIndex | None = _take_prefetched(work, _written_key(path))
    if written is not None:
        move_into_place(written.file, target)
        _remove_if_empty(written.file.parent)  # the start-up's folder: its last file is taken
        return written.rows, written.routes
    index = scan_inputs(path, work)
    write_parquet_atomic(inputs_index_frame(index), target)
    return index.keys.rows, index.routes


def scan_rollouts(
    path: Path,
    work: PrefetchedWork,
    *,
    limit: int | None = None,
    reject_duplicates: bool = True,
    require_response: bool = True,
) -> KeyIndex:
    """The rollouts index: the start-up's (in key order) if it made one of the file as it is, else scanned now.
    ``require_response`` False: the rows are carried over as they are (judge recovery's successes)."""
    key = _scan_key(_rollouts_kind(require_response), path, limit)
    if reject_duplicates and (prefetched := _take_prefetched(work, key)) is not None:
        return prefetched
    return index_rollouts(path, limit=limit, reject_duplicates=reject_duplicates, require_response=require_response)


def _rollouts_kind(require_response: bool) -> str:
    return "rollouts" if require_response else "carried"


def _in_key_order(index: KeyIndex) -> KeyIndex:
    """The index sorted by key, taking its columns (the caller must hold no other copy): the file-order
    columns are let go as the sorted ones are made, and the join then takes the sorted columns into the plan
    as they are."""
    return KeyIndex(index.path, take_sorted_by_key(index.frame))


def _scan_key(kind: str, path: Path, limit: int | None = None) -> Hashable:
    return (kind, path.resolve(), limit)


def _written_key(inputs: Path) -> Hashable:
    return ("inputs index file", inputs.resolve())


def _plan_key(inputs: Path, rollouts: Path, limit: int | None, config_hash: str) -> Hashable:
    return ("plan", inputs.resolve(), rollouts.resolve(), limit, config_hash)


def take_prefetched_plan(
    work: PrefetchedWork, inputs: Path, rollouts: Path, limit: int | None, config_hash: str
) -> pl.DataFrame | None:
    """The ``join_and_route`` plan ``PrefetchedInputs`` made of these files (or its error), if it made one."""
    return _take_prefetched(work, _plan_key(inputs, rollouts, limit, config_hash))


def hand_over_plan(work: PrefetchedWork, path: Path, plan: pl.DataFrame) -> None:
    """The plan as written to ``path``, kept for ``read_plan`` in the verify step of the same run (when it runs
    in the same process); a run keeps one plan at most (the latest), even if no verify step follows."""
    work.hand_over(HANDED_OVER_PLAN, [path], (path.resolve(), plan))


def read_plan(work: PrefetchedWork, path: Path) -> pl.DataFrame:
    """The plan at ``path``: the frame itself when this run's plan step handed it over, else read back. At a
    million rows, reading it back needed about 80 MB more than the frame, at the moment the verify step starts."""
    started = work.take(HANDED_OVER_PLAN)
    if started is not None and (handed := started.result())[0] == path.resolve():
        return handed[1]
    return pl.read_parquet(path)


def _take_prefetched(work: PrefetchedWork, key: Hashable) -> Any:
    started = work.take(key)
    return None if started is None else started.result()


class PrefetchedInputs:
    """``with PrefetchedInputs(...) as inputs:`` indexes, fingerprints and joins the two files, on ``work``.

    The assets that need these (``write_inputs_index``, ``scan_inputs``, ``scan_rollouts``,
    ``take_prefetched_plan``, the sources' content versions) take the results instead of doing the work
    again. ``join_with`` None: no join (judge recovery joins the inputs to the failures, not to the rollouts).
    The scan processes write their columns to a folder made inside ``index_folder``; with the join, the inputs
    index is written there too, as a parquet file, as soon as it is made, and its frame is let go once the join
    has used it: at a million rows that is 36 MB less held from the join to the end of the run's first step.
    What nobody took is forgotten on exit, the scan processes still running are stopped, and the folder removed
    once nothing writes into it; it goes earlier if all its files were taken (the scans' on ``wait``, the inputs
    index when the asset moves it into its run's folder). Should this process be killed (SIGKILL) before, a scan
    still running removes the folder, else the next start-up on this machine does (``_start_up_folder``).
    """

    def __init__(
        self,
        inputs: Path,
        rollouts: Path,
        *,
        limit: int | None,
        join_with: VerifierSetup | None,
        work: PrefetchedWork,
        index_folder: Path | None = None,
        require_response: bool = True,
    ) -> None:
        self.inputs, self.rollouts, self.limit, self.join_with = inputs, rollouts, limit, join_with
        self.work = work
        self.index_folder = index_folder
        self.rollouts_kind = _rollouts_kind(require_response)
        self._keys: list[Hashable] = []
        self._checks: list[Future[Any]] = []
        self._folder: Path | None = None
        self._scans: list[ScanProcess] = []
        self._writer: Future[Any] | None = None  # the thread that writes into the folder

    def __enter__(self) -> PrefetchedInputs:
        try:
            self._start()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _start(self) -> None:
        self._folder = folder = _start_up_folder(self.index_folder)
        inputs_scan = ScanProcess("inputs", self.inputs, None, folder / "inputs.keys", scratch=folder)
        self._scans.append(inputs_scan)
        rollouts_scans = [
            ScanProcess(
                self.rollouts_kind,
                self.rollouts,
                self.limit,
                folder / f"rollouts-{number}.keys",
                scratch=folder,
                part=part,
            )
            for number, part in enumerate(_rollouts_parts(self.rollouts, self.limit))
        ]
        self._scans += rollouts_scans
        rollouts_key = _scan_key(self.rollouts_kind, self.rollouts, self.limit)
        for_the_join: queue.SimpleQueue[InputsIndex] = queue.SimpleQueue()
        if self.join_with is None:
            inputs_key = _scan_key("inputs", self.inputs)
            inputs_index: Future[Any] = self.work.start(
                inputs_key, [self.inputs], lambda: _scanned_inputs(self.inputs, inputs_scan)
            )
        else:
            inputs_key = _written_key(self.inputs)
            inputs_index = self._writer = self.work.start(
                inputs_key,
                [self.inputs],
                lambda: _index_and_write_inputs(self.inputs, inputs_scan, folder, for_the_join),
            )

        def rollouts_in_key_order() -> KeyIndex:
            require_response = self.rollouts_kind == "rollouts"
            return _in_key_order(_scanned_rollouts(self.rollouts, self.limit, rollouts_scans, require_response))

        rollouts_index = self.work.start(rollouts_key, [self.rollouts], rollouts_in_key_order)
        self._keys = [inputs_key, rollouts_key]
        self._checks = [inputs_index, rollouts_index]
        if (setup := self.join_with) is not None:

            def join() -> pl.DataFrame:
                inputs_index.result()  # its error, if the scan failed
                return join_and_route(
                    for_the_join.get(),
                    rollouts_index.result(),
                    setup.topology,
                    check_prompts=not allows_prompt_mismatch(setup.config),
                )

            plan_key = _plan_key(self.inputs, self.rollouts, self.limit, setup.config_hash)
            self._keys.append(plan_key)
            self._checks.append(self.work.start(plan_key, [self.inputs, self.rollouts], join))
        self._keys += [self.work.start_file_digest(path) for path in (self.inputs, self.rollouts)]

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for scan in self._scans:
            scan.stop()
        for key in self._keys:
            self.work.forget(key)
        if self._writer is not None:
            # Removed only once nothing writes into it (the writer ends soon, its scan stopped): a file half-written
            # while the folder was removed would have kept it.
            futures.wait([self._writer], timeout=WRITER_STOP_WAIT_S)
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)

    def raise_if_failed(self) -> None:
        """Raise the first error (inputs, rollouts, join: the order the assets would meet them) known by now."""
        for check in self._checks:
            if not check.done():
                return
            check.result()

    def wait_for(self, other: Future[T]) -> T:
        """``other``'s result, unless a scan or the join fails first: that error is raised as soon as it is known."""
        while True:
            # Checked before each wait: a check that failed (or all finished) before it is not waited for again.
            self.raise_if_failed()
            if other.done():
                return other.result()
            pending = [check for check in self._checks if not check.done()]
            futures.wait([other, *pending], return_when=futures.FIRST_COMPLETED)

    def wait(self) -> None:
        """Wait for the scans and the join; raise the first error, in the order the assets would meet them.

        Then let go of the results: each asset takes its own from ``work`` and drops it when done, so a
        million rows' indexes are not held through the whole run.
        """
        for check in self._checks:
            check.result()
        self._checks = []
        if self._folder is not None:
            _remove_if_empty(self._folder)  # the scans' files are read; the inputs index, if written, waits


def _rollouts_parts(path: Path, limit: int | None) -> tuple[FilePart, ...]:
    """The parts of the rollouts file scanned each by a process of its own: its halves, if it is big and read to
    the end. The rollouts scan is the start-up's longest: at a million rows the inputs scan (whose repeated rows
    are not parsed) and Dagster's import were done 1.9 s before it, and one of two cores was idle."""
    if limit is not None:
        return (WHOLE_FILE,)
    try:
        if path.stat().st_size >= SPLIT_ROLLOUTS_BYTES:
            return FilePart.halves(path)
    except OSError:  # unreadable: the scan says what is wrong with it
        pass
    return (WHOLE_FILE,)


def _start_up_folder(parent: Path | None) -> Path:
    """A new folder for the start-up's files, named by this process and machine; first, the folders of start-ups
    on this machine whose process is gone (killed before it could clean up) are removed."""
    parent = Path(tempfile.gettempdir()) if parent is None else parent
    host, pid = socket.gethostname(), os.getpid()
    for folder in parent.glob(f"{START_UP_PREFIX}*"):
        owner, _, rest = folder.name.removeprefix(START_UP_PREFIX).partition("-")
        if owner.isdigit() and rest.startswith(f"{host}-") and not _is_running(int(owner)):
            shutil.rmtree(folder, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f"{START_UP_PREFIX}{pid}-{host}-", dir=parent))


def _remove_if_empty(folder: Path) -> None:
    """So that a start-up whose files are all taken leaves nothing behind, even if the run is killed later."""
    try:
        folder.rmdir()
    except OSError:  # not empty, or gone
        pass


def _is_running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's
        return True
    return True


def _scanned_inputs(path: Path, scan: ScanProcess) -> InputsIndex:
    return _scanned(path, [scan], lambda columns: inputs_index_of(path, columns), lambda: index_inputs(path))


def _scanned_rollouts(path: Path, limit: int | None, scans: list[ScanProcess], require_response: bool) -> KeyIndex:
    return _scanned(
        path,
        scans,
        lambda columns: rollouts_index_of(path, columns, limit=limit, require_response=require_response),
        lambda: index_rollouts(path, limit=limit, require_response=require_response),
    )


def _scanned(
    path: Path, scans: list[ScanProcess], index_of: Callable[[KeyColumns | None], T], scan_here: Callable[[], T]
) -> T:
    """The index made of the columns of the scan processes (of the file's consecutive parts); scanned here if one
    failed (not if it was stopped: ScanStopped). Once a part is found to need the exact scan, or its process
    failed, the other parts' processes are stopped first: nobody will read them."""
    parts: list[KeyColumns] = []
    try:
        for scan in scans:
            if (part := scan.columns()) is None:
                break
            parts.append(part)
    except ScanFailed as exc:
        log.debug("%s; scanning %s in this process", exc, path)
        _stop(scans)
        return scan_here()
    _stop(scans)
    return index_of(KeyColumns.joined(parts) if len(parts) == len(scans) else None)


def _stop(scans: list[ScanProcess]) -> None:
    for scan in scans:
        scan.stop()


def _index_and_write_inputs(
    path: Path, scan: ScanProcess, folder: Path, for_the_join: queue.SimpleQueue[InputsIndex]
) -> WrittenInputsIndex:
    """Index the inputs, write the index to ``folder`` and hand the frame to the join, which alone holds it."""
    index = _scanned_inputs(path, scan)
    file = folder / "materialized_inputs.parquet"
    try:
        write_parquet_atomic(inputs_index_frame(index), file)
    except OSError as exc:
        raise OutputError(f"cannot write the key index of {path} to {file}: {exc}", path=file) from exc
    for_the_join.put(index)
    return WrittenInputsIndex(file, index.keys.rows, index.routes)
