"""Everything checked before a server starts or an output file exists: config, inputs, rollouts, join."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from reverify_assets.config.fingerprint import verifier_config_hash
from reverify_assets.config.loading import load_config
from reverify_assets.config.topology import Topology, read_topology
from reverify_assets.errors import ReverifyError
from reverify_assets.lib.jsonl import JsonlLine
from reverify_assets.lib.key_index import KeyIndex, join_rollouts_to_inputs, scan_keys
from reverify_assets.lib.keys import RolloutKey
from reverify_assets.lib.payload import missing_response_message
from reverify_assets.servers.registry import validate_builtin_block

ROUTE_FIELDS = ("agent_ref", "task_source", "_ng_environment_server")


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
    route_ids: dict[bytes, int] = {}
    routes: list[dict[str, Any]] = []
    per_row: list[int] = []

    def remember_route(entry: JsonlLine, _: RolloutKey) -> None:
        fields = {name: entry.row[name] for name in ROUTE_FIELDS if name in entry.row}
        signature = repr(sorted(fields.items())).encode()
        if signature not in route_ids:
            route_ids[signature] = len(routes)
            routes.append(fields)
        per_row.append(route_ids[signature])

    keys = scan_keys(path, check=remember_route, reject_duplicates=reject_duplicates)
    return InputsIndex(keys, pl.Series("route", per_row, dtype=pl.Int32), routes)


def scan_rollouts(path: Path, *, limit: int | None = None, reject_duplicates: bool = True) -> KeyIndex:
    def require_response(entry: JsonlLine, key: RolloutKey) -> None:
        if "response" not in entry.row:
            raise ReverifyError(f"{path}:{entry.line_no}: {missing_response_message(entry.row, key)}")

    return scan_keys(path, check=require_response, limit=limit, reject_duplicates=reject_duplicates)


def join_and_route(inputs: InputsIndex, rollouts: KeyIndex, topology: Topology) -> pl.DataFrame:
    """The join plan (see ``join_rollouts_to_inputs``) with the server instance of each row."""
    keyed_inputs = KeyIndex(inputs.keys.path, inputs.keys.frame.with_columns(inputs.route_of_row))
    plan = join_rollouts_to_inputs(keyed_inputs, rollouts)
    servers = [topology.server_for(route) for route in _used_routes(plan, inputs.routes)]
    route_to_server = {route_id: server for route_id, server in zip(_used_route_ids(plan), servers, strict=True)}
    return plan.with_columns(
        pl.col("route").replace_strict(route_to_server, return_dtype=pl.String).alias("server")
    ).drop("route")


def _used_route_ids(plan: pl.DataFrame) -> list[int]:
    return sorted(plan["route"].unique().to_list())


def _used_routes(plan: pl.DataFrame, routes: list[dict[str, Any]]) -> list[Mapping[str, Any]]:
    return [routes[route_id] for route_id in _used_route_ids(plan)]
