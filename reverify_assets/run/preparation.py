"""Everything checked before any row is verified: config, inputs, rollouts, join.

``reverify run`` does this work ahead of the assets, beside Dagster's import: see ``startup_prefetch``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from reverify_assets.config.fingerprint import verifier_config_hash
from reverify_assets.config.implementations import check_implementation, runs_builtin
from reverify_assets.config.loading import load_config
from reverify_assets.config.topology import Topology, read_topology
from reverify_assets.errors import InputError
from reverify_assets.files.jsonl import JsonlLine
from reverify_assets.gym.installation import find_installation
from reverify_assets.gym.launch import server_folder
from reverify_assets.judge_cache.store import judge_cache_path
from reverify_assets.keys.key_columns import KeyColumns, scan_key_columns
from reverify_assets.keys.key_index import (
    KeyIndex,
    join_rollouts_to_inputs,
    key_index_of,
    scan_keys,
)
from reverify_assets.keys.rollout_keys import RolloutKey, describe_key
from reverify_assets.keys.route_fields import RouteTable, route_fields
from reverify_assets.processes import secrets as process_secrets
from reverify_assets.rows.payload import has_response, missing_response_message
from reverify_assets.run.config_secrets import config_secrets
from reverify_assets.run.replication import check_placement_fields
from reverify_assets.servers.registry import BUILTIN_SERVERS, check_known_fields, validate_builtin_block

log = logging.getLogger("reverify")
_SAID: set[tuple[str, str, str]] = set()  # warnings given by this process


@dataclass(frozen=True)
class VerifierSetup:
    config: dict[str, Any]
    topology: Topology
    config_hash: str
    # Where the judges' servers keep and find verdicts (None: they ask the judge every time). How the verifier is
    # run, not what it is: no part of the hash.
    judge_cache: Path | None

    def for_run(self, *, no_judge_cache: bool, recovery: bool) -> VerifierSetup:
        """A judge recovery runs without the cache: its rows are those whose judging failed, and a reply the cache
        kept for one (a NeMo Gym judge's ``judge_invalid`` verdict) is the failure itself."""
        return self.without_judge_cache() if no_judge_cache or recovery else self

    def without_judge_cache(self) -> VerifierSetup:
        """For ``--no-judge-cache``, a judge recovery (its rows are those whose judging failed) and the probe's and
        noise floor's passes (a pass answered from the cache would agree by construction)."""
        return replace(self, judge_cache=None)


def load_verifier_setup(config_paths: list[Path], overrides: list[str]) -> VerifierSetup:
    loaded = load_config(config_paths, overrides)
    config = loaded.values
    topology = read_topology(config, loaded.sources)
    process_secrets.remember(config_secrets(config, topology))
    for block in topology.servers.values():
        if block.url:
            continue
        check_implementation(block)
        check_placement_fields(block)
        if runs_builtin(block):
            validate_builtin_block(block)
        else:
            if block.type in BUILTIN_SERVERS:
                check_known_fields(block)
            server_folder(block, find_installation(config, sources=loaded.sources))
            for field_name, model in block.undeclared_models(config):
                if (block.instance, field_name, model) in _SAID:  # the command and its Dagster run load it both
                    continue
                _SAID.add((block.instance, field_name, model))
                log.warning(
                    "WARNING: %s names the model server %r, which the config does not declare (NeMo Gym refuses "
                    "such a config): every row the server asks it about fails as judge_failed. Add its config "
                    "(NeMo Gym's responses_api_models/openai_model/configs/openai_model.yaml, say) as another "
                    "--config, or run --judge-failed-only with it afterwards",
                    block.named(field_name),
                    model,
                )
    # A judge's model server is part of the grader: another model is another verifier.
    models = {model.instance: model for block in topology.servers.values() for model in block.referenced_models(config)}
    config_hash = verifier_config_hash([*topology.servers.values(), *models.values()])
    return VerifierSetup(config, topology, config_hash, judge_cache_path())


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
    columns = scan_key_columns(path, with_routes=True, with_prompts=True)
    return inputs_index_of(path, columns, reject_duplicates=reject_duplicates)


def inputs_index_of(path: Path, columns: KeyColumns | None, *, reject_duplicates: bool = True) -> InputsIndex:
    """The inputs index from ``scan_key_columns``'s columns of ``path``; None: the exact scan's."""
    if columns is None:
        return _scan_inputs_by_line(path, reject_duplicates=reject_duplicates)
    assert columns.route_of_row is not None and columns.routes is not None  # scanned with_routes
    keys = key_index_of(path, columns, reject_duplicates=reject_duplicates)
    route_of_row = pl.Series("route", np.frombuffer(columns.route_of_row, dtype=np.int32), dtype=pl.Int32)
    return InputsIndex(keys, route_of_row, columns.routes)


def _scan_inputs_by_line(path: Path, *, reject_duplicates: bool) -> InputsIndex:
    table = RouteTable()
    per_row: list[int] = []

    def remember_route(entry: JsonlLine, _: RolloutKey) -> None:
        per_row.append(table.id_of(route_fields(entry.row)))

    keys = scan_keys(path, check=remember_route, reject_duplicates=reject_duplicates, with_prompts=True)
    return InputsIndex(keys, pl.Series("route", per_row, dtype=pl.Int32), table.routes)


def index_rollouts(
    path: Path, *, limit: int | None = None, reject_duplicates: bool = True, require_response: bool = True
) -> KeyIndex:
    """The rollouts' key index, in file order, scanned now (``startup_prefetch.scan_rollouts`` takes the start-up's,
    in key order, when it made one). ``require_response`` False: rows only carried over, never re-verified."""
    columns = scan_key_columns(path, with_prompts=require_response, require_response=require_response, limit=limit)
    return rollouts_index_of(
        path, columns, limit=limit, reject_duplicates=reject_duplicates, require_response=require_response
    )


def rollouts_index_of(
    path: Path,
    columns: KeyColumns | None,
    *,
    limit: int | None = None,
    reject_duplicates: bool = True,
    require_response: bool = True,
) -> KeyIndex:
    """The rollouts index from ``scan_key_columns``'s columns of ``path``; None: the exact scan's."""
    if columns is None and not require_response:
        return scan_keys(path, limit=limit, reject_duplicates=reject_duplicates)
    if columns is None:

        def has_a_response(entry: JsonlLine, key: RolloutKey) -> None:
            if not has_response(entry.row):
                raise InputError(
                    f"{path}:{entry.line_no}: {missing_response_message(entry.row, key)}",
                    path=path,
                    line=entry.line_no,
                    key=describe_key(key),
                )

        return scan_keys(
            path, check=has_a_response, limit=limit, reject_duplicates=reject_duplicates, with_prompts=True
        )
    return key_index_of(path, columns, reject_duplicates=reject_duplicates)


def rollouts_scan_limit(limit: int | None, judge_failed_only: bool) -> int | None:
    """The rows of --rollouts to index: in judge recovery --limit counts recovered rows, never the successes."""
    return None if judge_failed_only else limit


def join_and_route(
    inputs: InputsIndex,
    rollouts: KeyIndex,
    topology: Topology,
    *,
    keep_route: bool = False,
    check_prompts: bool = True,
) -> pl.DataFrame:
    """The join plan (see ``join_rollouts_to_inputs``) with the server instance of each row; ``keep_route``: and
    the id of its routing fields (``inputs.routes``), which the verify step does not need. ``check_prompts``:
    refuse rollouts whose prompt is not their input row's (off by ``allow_prompt_mismatch``)."""
    keyed_inputs = KeyIndex(inputs.keys.path, inputs.keys.frame.with_columns(inputs.route_of_row))
    plan = join_rollouts_to_inputs(keyed_inputs, rollouts, check_prompts=check_prompts)
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
    plan = plan.with_columns(server.alias("server"))
    return plan if keep_route else plan.drop("route")


def _used_route_ids(plan: pl.DataFrame) -> list[int]:
    return sorted(plan["route"].unique().to_list())


def _used_routes(plan: pl.DataFrame, routes: list[dict[str, Any]]) -> list[Mapping[str, Any]]:
    return [routes[route_id] for route_id in _used_route_ids(plan)]
