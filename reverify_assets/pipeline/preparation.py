"""Everything checked before any row is verified: config, inputs, rollouts, join.

``reverify run`` does this work in threads ahead of the assets: see ``startup_prefetch``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from reverify_assets.config.fingerprint import verifier_config_hash
from reverify_assets.config.loading import load_config
from reverify_assets.config.topology import Topology, read_topology
from reverify_assets.errors import ReverifyError
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
from reverify_assets.lib.sorted_keys import first_appearance_groups
from reverify_assets.servers.registry import validate_builtin_block

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


def inputs_index_frame(index: InputsIndex) -> pl.DataFrame:
    """The inputs index as the ``materialized_inputs`` asset stores it: the key index with each row's route."""
    return index.keys.frame.with_columns(index.route_of_row)


def index_inputs(path: Path, *, reject_duplicates: bool = True) -> InputsIndex:
    """The materialized inputs' key index, with each row's route, scanned now (``startup_prefetch.scan_inputs``
    takes the start-up's instead, when it made one)."""
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


def index_rollouts(path: Path, *, limit: int | None = None, reject_duplicates: bool = True) -> KeyIndex:
    """The rollouts' key index, in file order, scanned now (``startup_prefetch.scan_rollouts`` takes the start-up's,
    in key order, when it made one)."""

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


def rollouts_scan_limit(limit: int | None, judge_failed_only: bool) -> int | None:
    """The rows of --rollouts to index: in judge recovery --limit counts recovered rows, never the successes."""
    return None if judge_failed_only else limit


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
