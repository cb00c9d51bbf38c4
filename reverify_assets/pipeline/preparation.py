"""Everything checked before any row is verified: config, inputs, rollouts, join.

``reverify run`` starts the key scans, the join and the sources' fingerprints in threads as soon as its
options are known (``PrefetchedInputs``), so they overlap the Dagster import and instance set-up; the
assets that need them then take their results instead of doing the work again.
"""

from __future__ import annotations

import os
import queue
import shutil
import socket
import tempfile
from collections.abc import Hashable, Mapping
from concurrent import futures
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import numpy as np
import polars as pl

from reverify_assets.config.fingerprint import verifier_config_hash
from reverify_assets.config.loading import load_config
from reverify_assets.config.topology import Topology, read_topology
from reverify_assets.errors import ReverifyError
from reverify_assets.lib import prefetch
from reverify_assets.lib.atomic_files import move_into_place, write_parquet_atomic
from reverify_assets.lib.jsonl import JsonlLine, read_row_at
from reverify_assets.lib.key_index import (
    INDEX_SCHEMA,
    KeyIndex,
    join_rollouts_to_inputs,
    read_key_fields,
    recheck_rows,
    reject_duplicate_keys,
    scan_keys,
)
from reverify_assets.lib.keys import RolloutKey
from reverify_assets.lib.payload import missing_response_message
from reverify_assets.lib.sorted_keys import first_appearance_groups, take_sorted_by_key
from reverify_assets.servers.registry import validate_builtin_block

T = TypeVar("T")
HANDED_OVER_PLAN = ("plan file",)
START_UP_PREFIX = "start-up-"
ROUTE_FIELDS = ("agent_ref", "task_source", "_ng_environment_server")
# Reads `response` as null when missing (or null) and as a struct when it is an object, without building it.
RESPONSE_PRESENCE = pl.Struct({"__reverify_presence__": pl.Null})


@dataclass(frozen=True)
class VerifierSetup:
    config: dict[str, Any]
    topology: Topology
    config_hash: str


def load_verifier_setup(config_paths: list[Path], overrides: list[str]) -> VerifierSetup:
    config = load_config(config_paths, overrides)
    topology = read_topology(config)
    for block in topology.servers.values():
        if not block.url:
            validate_builtin_block(block)
    return VerifierSetup(config, topology, verifier_config_hash(topology.servers.values()))


@dataclass(frozen=True)
class InputsIndex:
    keys: KeyIndex
    route_of_row: pl.Series  # per row of keys.frame: the id of its routing fields
    routes: list[dict[str, Any]]  # id -> the routing fields themselves


def scan_inputs(path: Path, *, reject_duplicates: bool = True) -> InputsIndex:
    if reject_duplicates and (prefetched := _take_prefetched(_scan_key("inputs", path))) is not None:
        return prefetched
    return _scan_inputs(path, reject_duplicates=reject_duplicates)


def inputs_index_frame(index: InputsIndex) -> pl.DataFrame:
    """The inputs index as the ``materialized_inputs`` asset stores it: the key index with each row's route."""
    return index.keys.frame.with_columns(index.route_of_row)


@dataclass(frozen=True)
class WrittenInputsIndex:
    """The inputs index as the start-up wrote it (see ``PrefetchedInputs``), for the asset to move into place."""

    file: Path
    rows: int
    routes: list[dict[str, Any]]


def write_inputs_index(path: Path, target: Path) -> tuple[int, list[dict[str, Any]]]:
    """Write the key index of the inputs file ``path`` to ``target``: the start-up's file moved there if it made
    one, else a scan's. Returns its rows and routes."""
    written: WrittenInputsIndex | None = _take_prefetched(_written_key(path))
    if written is not None:
        move_into_place(written.file, target)
        return written.rows, written.routes
    index = scan_inputs(path)
    write_parquet_atomic(inputs_index_frame(index), target)
    return index.keys.rows, index.routes


def _scan_inputs(path: Path, *, reject_duplicates: bool = True) -> InputsIndex:
    frame = read_key_fields(path, dict.fromkeys(ROUTE_FIELDS, pl.String))
    if frame is None:
        return _scan_inputs_by_line(path, reject_duplicates=reject_duplicates)
    frame = recheck_rows(path, frame, pl.any_horizontal(pl.col("task", "rollout").is_null()))
    keys = KeyIndex(path, frame.select(list(INDEX_SCHEMA)))
    if reject_duplicates:
        reject_duplicate_keys(keys)
    route_of_row, routes = _routes(path, frame)
    return InputsIndex(keys, route_of_row, routes)


def _routes(path: Path, frame: pl.DataFrame) -> tuple[pl.Series, list[dict[str, Any]]]:
    """Each row's route, numbered in order of first appearance as ``_scan_inputs_by_line`` numbers them.

    Rows are grouped by their routing fields as polars read them (an object's JSON text, a string's
    value), then each group's fields are taken from its first row, parsed exactly. Groups whose rows hold
    the same fields in another spelling (spacing inside an object) share a route; rows that read alike but
    differ in JSON type (a field missing in one and null in another, ``5`` and ``"5"``) share their first
    row's route.
    """
    group_of_row, first_rows = first_appearance_groups(frame, ROUTE_FIELDS)
    route_ids: dict[bytes, int] = {}
    routes: list[dict[str, Any]] = []
    group_route: list[int] = []
    firsts = frame.select("offset", "line")[first_rows]
    with open(path, "rb") as fh:
        for offset, line in firsts.iter_rows():
            row = read_row_at(fh, offset, path, line)
            group_route.append(_route_id(row, route_ids, routes))
    per_row = np.asarray(group_route, dtype=np.int32)[group_of_row]
    return pl.Series("route", per_row, dtype=pl.Int32), routes


def _route_id(row: dict[str, Any], route_ids: dict[bytes, int], routes: list[dict[str, Any]]) -> int:
    fields = {name: row[name] for name in ROUTE_FIELDS if name in row}
    signature = repr(sorted(fields.items())).encode()
    if signature not in route_ids:
        route_ids[signature] = len(routes)
        routes.append(fields)
    return route_ids[signature]


def _scan_inputs_by_line(path: Path, *, reject_duplicates: bool) -> InputsIndex:
    route_ids: dict[bytes, int] = {}
    routes: list[dict[str, Any]] = []
    per_row: list[int] = []

    def remember_route(entry: JsonlLine, _: RolloutKey) -> None:
        per_row.append(_route_id(entry.row, route_ids, routes))

    keys = scan_keys(path, check=remember_route, reject_duplicates=reject_duplicates)
    return InputsIndex(keys, pl.Series("route", per_row, dtype=pl.Int32), routes)


def scan_rollouts(path: Path, *, limit: int | None = None, reject_duplicates: bool = True) -> KeyIndex:
    if reject_duplicates and (prefetched := _take_prefetched(_scan_key("rollouts", path, limit))) is not None:
        return prefetched
    return _scan_rollouts(path, limit=limit, reject_duplicates=reject_duplicates)


def _scan_rollouts(path: Path, *, limit: int | None = None, reject_duplicates: bool = True) -> KeyIndex:
    def require_response(entry: JsonlLine, key: RolloutKey) -> None:
        if "response" not in entry.row:
            raise ReverifyError(f"{path}:{entry.line_no}: {missing_response_message(entry.row, key)}")

    frame = read_key_fields(path, {"response": RESPONSE_PRESENCE}, limit=limit)
    if frame is None:
        return scan_keys(path, check=require_response, limit=limit, reject_duplicates=reject_duplicates)
    # A null response is missing or JSON null: only the line itself tells which.
    suspect = pl.any_horizontal(pl.col("task", "rollout", "response").is_null())
    index = KeyIndex(path, recheck_rows(path, frame, suspect, require_response).select(list(INDEX_SCHEMA)))
    if reject_duplicates:
        reject_duplicate_keys(index)
    return index


def _in_key_order(index: KeyIndex) -> KeyIndex:
    """The index sorted by key, taking its columns (the caller must hold no other copy): the file-order
    columns are let go as the sorted ones are made, and the join then takes the sorted columns into the plan
    as they are."""
    return KeyIndex(index.path, take_sorted_by_key(index.frame))


def rollouts_scan_limit(limit: int | None, judge_failed_only: bool) -> int | None:
    """The rows of --rollouts to index: in judge recovery --limit counts recovered rows, never the successes."""
    return None if judge_failed_only else limit


# --- the start-up of `reverify run`: scans, fingerprints and join started ahead of the assets ------------------


def _scan_key(kind: str, path: Path, limit: int | None = None) -> Hashable:
    return (kind, path.resolve(), limit)


def _written_key(inputs: Path) -> Hashable:
    return ("inputs index file", inputs.resolve())


def _plan_key(inputs: Path, rollouts: Path, limit: int | None, config_hash: str) -> Hashable:
    return ("plan", inputs.resolve(), rollouts.resolve(), limit, config_hash)


def take_prefetched_plan(inputs: Path, rollouts: Path, limit: int | None, config_hash: str) -> pl.DataFrame | None:
    """The ``join_and_route`` plan ``PrefetchedInputs`` made of these files (or its error), if it made one."""
    started = prefetch.take(_plan_key(inputs, rollouts, limit, config_hash))
    return None if started is None else started.result()


def hand_over_plan(path: Path, plan: pl.DataFrame) -> None:
    """The plan as written to ``path``, kept for ``read_plan`` in the verify step of the same process; a
    process keeps one plan at most (the latest), even if no verify step follows."""
    prefetch.hand_over(HANDED_OVER_PLAN, [path], (path.resolve(), plan))


def read_plan(path: Path) -> pl.DataFrame:
    """The plan at ``path``: the frame itself when this process wrote it, else read back. At a million rows,
    reading it back needed about 80 MB more than the frame, at the moment the verify step starts."""
    started = prefetch.take(HANDED_OVER_PLAN)
    if started is not None and (handed := started.result())[0] == path.resolve():
        return handed[1]
    return pl.read_parquet(path)


def _take_prefetched(key: Hashable) -> Any:
    started = prefetch.take(key)
    return None if started is None else started.result()


class PrefetchedInputs:
    """``with PrefetchedInputs(...) as inputs:`` indexes, fingerprints and joins the two files in threads.

    The assets that need these (``write_inputs_index``, ``scan_inputs``, ``scan_rollouts``,
    ``take_prefetched_plan``, the sources' content versions) take the results instead of doing the work
    again. ``join_with`` None: no join (judge recovery joins the inputs to the failures, not to the rollouts).
    With the join, the inputs index is written to a parquet file in a folder made inside ``index_folder``
    as soon as it is made, and its frame is let go once the join has used it: at a million rows that is
    36 MB less held from the join to the end of the run's first step. What nobody took is forgotten on exit,
    and the folder removed.
    """

    def __init__(
        self,
        inputs: Path,
        rollouts: Path,
        *,
        limit: int | None,
        join_with: VerifierSetup | None,
        index_folder: Path | None = None,
    ) -> None:
        self.inputs, self.rollouts, self.limit, self.join_with = inputs, rollouts, limit, join_with
        self.index_folder = index_folder
        self._keys: list[Hashable] = []
        self._checks: list[Future[Any]] = []
        self._folder: Path | None = None

    def __enter__(self) -> PrefetchedInputs:
        try:
            self._start()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _start(self) -> None:
        rollouts_key = _scan_key("rollouts", self.rollouts, self.limit)
        for_the_join: queue.SimpleQueue[InputsIndex] = queue.SimpleQueue()
        if self.join_with is None:
            inputs_key = _scan_key("inputs", self.inputs)
            inputs_index: Future[Any] = prefetch.start(inputs_key, [self.inputs], lambda: _scan_inputs(self.inputs))
        else:
            self._folder = _start_up_folder(self.index_folder)
            inputs_key = _written_key(self.inputs)
            folder = self._folder
            inputs_index = prefetch.start(
                inputs_key, [self.inputs], lambda: _scan_and_write_inputs(self.inputs, folder, for_the_join)
            )

        def scan_rollouts_next() -> KeyIndex:
            # One scan at a time: each already keeps every core busy, and two at once held about 100 MB more
            # at their peak (1M rows); the inputs' errors come sooner, and the rollouts' no later.
            inputs_index.exception()
            return _in_key_order(_scan_rollouts(self.rollouts, limit=self.limit))

        rollouts_index = prefetch.start(rollouts_key, [self.rollouts], scan_rollouts_next)
        self._keys = [inputs_key, rollouts_key]
        self._checks = [inputs_index, rollouts_index]
        if (setup := self.join_with) is not None:

            def join() -> pl.DataFrame:
                inputs_index.result()  # its error, if the scan failed
                return join_and_route(for_the_join.get(), rollouts_index.result(), setup.topology)

            plan_key = _plan_key(self.inputs, self.rollouts, self.limit, setup.config_hash)
            self._keys.append(plan_key)
            self._checks.append(prefetch.start(plan_key, [self.inputs, self.rollouts], join))
        self._keys += [prefetch.start_file_digest(path) for path in (self.inputs, self.rollouts)]

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for key in self._keys:
            prefetch.forget(key)
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

        Then let go of the results: each asset takes its own from ``prefetch`` and drops it when done, so a
        million rows' indexes are not held through the whole run.
        """
        for check in self._checks:
            check.result()
        self._checks = []


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


def _is_running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's
        return True
    return True


def _scan_and_write_inputs(
    path: Path, folder: Path, for_the_join: queue.SimpleQueue[InputsIndex]
) -> WrittenInputsIndex:
    """Index the inputs, write the index to ``folder`` and hand the frame to the join, which alone holds it."""
    index = _scan_inputs(path)
    file = folder / "materialized_inputs.parquet"
    try:
        write_parquet_atomic(inputs_index_frame(index), file)
    except OSError as exc:
        raise ReverifyError(f"cannot write the key index of {path} to {file}: {exc}") from exc
    for_the_join.put(index)
    return WrittenInputsIndex(file, index.keys.rows, index.routes)


def join_and_route(inputs: InputsIndex, rollouts: KeyIndex, topology: Topology) -> pl.DataFrame:
    """The join plan (see ``join_rollouts_to_inputs``) with the server instance of each row."""
    keyed_inputs = KeyIndex(inputs.keys.path, inputs.keys.frame.with_columns(inputs.route_of_row))
    plan = join_rollouts_to_inputs(keyed_inputs, rollouts)
    servers = [topology.server_for(route) for route in _used_routes(plan, inputs.routes)]
    route_to_server = {route_id: server for route_id, server in zip(_used_route_ids(plan), servers, strict=True)}
    # An enum, not strings: at a million rows a string column held 16 MB through the whole verify step.
    server_names = pl.Enum(sorted(set(servers)))
    # With no rows there is nothing to replace, and polars would leave the routes' integers in the column.
    server = (
        pl.col("route").replace_strict(route_to_server, return_dtype=server_names)
        if route_to_server
        else pl.lit(None, dtype=server_names)
    )
    return plan.with_columns(server.alias("server")).drop("route")


def _used_route_ids(plan: pl.DataFrame) -> list[int]:
    return sorted(plan["route"].unique().to_list())


def _used_routes(plan: pl.DataFrame, routes: list[dict[str, Any]]) -> list[Mapping[str, Any]]:
    return [routes[route_id] for route_id in _used_route_ids(plan)]
