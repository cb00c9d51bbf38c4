"""Shard outputs merged in key order, then the same metrics as the unsharded run (``reverify aggregate``).

Each shard's failures sidecar is read for the coverage of the metrics; the shards' plans are not known, so
each entry says its expected total is unknown. Rows scored by different verifier configs (rows without
``reverify_provenance`` count as one config of their own, ``original``) are refused unless
``allow_mixed_configs``; each entry's ``provenance`` block lists the configs either way.

A glob that names only the output aggregates that file as it is: how a run whose ``/aggregate_metrics`` failed
is finished. Then NeMo Gym's rollout health checks (``gym.rollout_health``), as ``gym eval aggregate`` runs them.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Hashable
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from reverify_assets.errors import InputError, StateError, UsageError
from reverify_assets.files.names import aggregate_metrics_path, expand_input_glob, output_partition_key, sidecar_path
from reverify_assets.files.output_lock import HeldOutputs, exclusive_output
from reverify_assets.gym.rollout_health import HealthOutcome, RolloutHealthCheck
from reverify_assets.metrics.coverage import describe_configs, mixed_configs_message
from reverify_assets.processes.prefetch import PrefetchedWork
from reverify_assets.rows.result_routing import PROVENANCE_FIELD, scoring_config
from reverify_assets.run.aggregation_rows import rows_of_shards
from reverify_assets.run.coverage_count import CoverageSources
from reverify_assets.run.metrics_step import Aggregation, run_aggregation
from reverify_assets.run.preparation import VerifierSetup
from reverify_assets.run.shard_merge import CountsByShard, index_shards

log = logging.getLogger("reverify")


@dataclass(frozen=True)
class ShardFiles:
    shards: list[Path]
    in_place: bool  # the glob names only the output: its metrics are computed where it is


@dataclass(frozen=True)
class ShardAggregate:
    output: Path
    rows: int
    shards: int
    merged: bool  # the shards were merged into ``output``
    aggregation: Aggregation | None  # None: no row carries an agent name, no metrics written
    health: HealthOutcome | None  # None: the config turns the rollout health checks off


def check_output_name(output: Path) -> None:
    if output.suffix != ".jsonl":
        raise UsageError(f"--output must name a .jsonl file, got {output}")
    output_partition_key(output)


def shard_files(input_glob: str, output: Path) -> ShardFiles:
    """The shards ``input_glob`` names. An earlier merge into ``output`` is not a shard of this one, unless it is
    all the glob names: then it is the output of a run whose metrics failed, aggregated where it is."""
    named = expand_input_glob(input_glob)
    shards = [path for path in named if path.resolve() != output.resolve()]
    if not shards and named:
        return ShardFiles(named, in_place=True)
    if not shards:
        raise InputError(f"No shards matched {input_glob!r}")
    return ShardFiles(shards, in_place=False)


def configs_of(shards: list[Path], counts: CountsByShard) -> tuple[Counter[str], dict[str, str]]:
    """Rows by the verifier config that scored them, and the first shard holding each config."""
    rows: Counter[str] = Counter()
    first_file: dict[str, str] = {}
    for shard, shard_counts in zip(shards, counts.by_shard, strict=True):
        rows.update(shard_counts)
        for config in shard_counts:
            first_file.setdefault(config, str(shard))
    return rows, first_file


def start_shard_index(work: PrefetchedWork, files: ShardFiles) -> None:
    """Index the shards in a thread now, for ``aggregate_shards`` to take: the command's Dagster import runs
    alongside (at 100,000 rows the index was ready at 0.7 s, the import at 1.4 s)."""
    work.start(_index_key(files.shards), files.shards, lambda: _index(files.shards))


def aggregate_shards(
    input_glob: str,
    output: Path,
    setup: VerifierSetup,
    work: PrefetchedWork,
    *,
    allow_mixed_configs: bool,
    held: HeldOutputs | None = None,
) -> ShardAggregate:
    """The merge replaces ``output`` and the metrics beside it: never under a run still appending to it (``held``:
    the outputs whose locks the command holds)."""
    check_output_name(output)
    with exclusive_output(output, held):
        return _aggregate(shard_files(input_glob, output), output, setup, work, allow_mixed_configs)


def _index_key(shards: list[Path]) -> Hashable:
    return ("shard index", *(shard.resolve() for shard in shards))


def _index(shards: list[Path]) -> tuple[pl.DataFrame, CountsByShard]:
    counts = CountsByShard((PROVENANCE_FIELD,), scoring_config)
    return index_shards(shards, counts), counts


def _aggregate(
    files: ShardFiles, output: Path, setup: VerifierSetup, work: PrefetchedWork, allow_mixed_configs: bool
) -> ShardAggregate:
    shards = files.shards
    health_check = RolloutHealthCheck.for_config(setup.config)
    if files.in_place:
        log.info("reverify: %s is all the glob names: its metrics are computed where it is, the file unchanged", output)
    started = work.take(_index_key(shards))
    index, counts = started.result() if started is not None else _index(shards)
    log.info("reverify: %d rows in %d shards", index.height, len(shards))
    rows_by_config, first_file = configs_of(shards, counts)
    if (mixed := mixed_configs_message(rows_by_config, first_file)) is not None:
        if not allow_mixed_configs:
            raise StateError(mixed)
        log.warning(
            "WARNING: --allow-mixed-configs: aggregating rows of %d verifier configs: %s",
            len(rows_by_config),
            describe_configs(rows_by_config, first_file),
        )
    merge = setup.config.get("merge_shards", True) and not files.in_place
    rows = rows_of_shards(index, shards, output if merge else None)
    sources = CoverageSources.of([sidecar_path(shard) for shard in shards], expected=None)
    # Closed at once if the metrics fail: the merged file's temporary copy goes then, not at the next collection.
    with closing(rows):
        aggregation = run_aggregation(rows, setup, aggregate_metrics_path(output), sources)
    # As NeMo Gym: the merged file, else (merge_shards=false) the shards, with the reports beside the output.
    checked = [output] if merge or files.in_place else shards
    health = None if health_check is None else health_check.run(checked, output.parent)
    return ShardAggregate(output, index.height, len(shards), bool(merge), aggregation, health)
