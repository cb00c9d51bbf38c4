"""``reverify aggregate``: shards merged in key order, then the same metrics as the unsharded run.

Each shard's failures sidecar is read for the coverage of the metrics; the shards' plans are not known, so
each entry says its expected total is unknown. Rows scored by different verifier configs (rows without
``reverify_provenance`` count as one config of their own, ``original``) are refused unless
``--allow-mixed-configs`` is given; each entry's ``provenance`` block lists the configs either way.

A glob that names only ``--output`` aggregates that file as it is: how a run whose ``/aggregate_metrics`` failed
is finished.
"""

from __future__ import annotations

import argparse
import logging
from collections import Counter
from contextlib import closing
from pathlib import Path

from reverify_assets.cli.summary import print_coverage
from reverify_assets.errors import ReverifyError, UsageError
from reverify_assets.lib.file_names import aggregate_metrics_path, sidecar_path
from reverify_assets.lib.output_lock import exclusive_output
from reverify_assets.lib.result_routing import PROVENANCE_FIELD, scoring_config
from reverify_assets.lib.shard_globs import expand_input_glob
from reverify_assets.metrics.coverage import describe_configs, mixed_configs_message
from reverify_assets.pipeline.aggregation_rows import rows_of_shards
from reverify_assets.pipeline.coverage_count import CoverageSources
from reverify_assets.pipeline.metrics_step import run_aggregation
from reverify_assets.pipeline.preparation import VerifierSetup, load_verifier_setup
from reverify_assets.pipeline.shard_merge import CountsByShard, index_shards

log = logging.getLogger("reverify")


def configs_of(shards: list[Path], counts: CountsByShard) -> tuple[Counter[str], dict[str, str]]:
    """Rows by the verifier config that scored them, and the first shard holding each config."""
    rows: Counter[str] = Counter()
    first_file: dict[str, str] = {}
    for shard, shard_counts in zip(shards, counts.by_shard, strict=True):
        rows.update(shard_counts)
        for config in shard_counts:
            first_file.setdefault(config, str(shard))
    return rows, first_file


def aggregate_command(args: argparse.Namespace, overrides: list[str]) -> None:
    output = Path(args.output)
    if output.suffix != ".jsonl":
        raise UsageError(f"--output must name a .jsonl file, got {output}")
    setup = load_verifier_setup([Path(p) for p in args.config], overrides)
    # The merge replaces --output and the metrics beside it: never under a run still appending to it.
    with exclusive_output(output):
        _aggregate(args, setup, output)


def _aggregate(args: argparse.Namespace, setup: VerifierSetup, output: Path) -> None:
    merge_shards = setup.config.get("merge_shards", True)
    named = expand_input_glob(args.input_glob)
    # An earlier merge into --output is not a shard of this one, unless it is all the glob names: then it is the
    # output of a run whose metrics failed, aggregated where it is and never rewritten.
    shards = [path for path in named if path.resolve() != output.resolve()]
    in_place = not shards and bool(named)
    if in_place:
        log.info("reverify: %s is all the glob names: its metrics are computed where it is, the file unchanged", output)
        shards = named
    if not shards:
        raise ReverifyError(f"No shards matched {args.input_glob!r}")
    counts = CountsByShard((PROVENANCE_FIELD,), scoring_config)
    index = index_shards(shards, counts)
    log.info("reverify: %d rows in %d shards", index.height, len(shards))
    rows_by_config, first_file = configs_of(shards, counts)
    if (mixed := mixed_configs_message(rows_by_config, first_file)) is not None:
        if not args.allow_mixed_configs:
            raise ReverifyError(mixed)
        log.warning(
            "WARNING: --allow-mixed-configs: aggregating rows of %d verifier configs: %s",
            len(rows_by_config),
            describe_configs(rows_by_config, first_file),
        )

    def announce_merged() -> None:
        print(f"Merged:  {output} ({index.height} rows, sorted by key)")

    merged = output if merge_shards and not in_place else None
    rows = rows_of_shards(index, shards, merged, on_merged=announce_merged)
    metrics_path = aggregate_metrics_path(output)
    sources = CoverageSources.of([sidecar_path(shard) for shard in shards], expected=None)
    # Closed at once if the metrics fail: the merged file's temporary copy goes then, not at the next collection.
    with closing(rows):
        entries = run_aggregation(rows, setup, metrics_path, sources)
    if entries is None:
        print("No row carries an agent name: no metrics written.")
        return
    print(f"Metrics: {metrics_path}")
    print_coverage(
        {entry["agent_ref"]["name"]: entry["coverage"] for entry in entries},
        {entry["agent_ref"]["name"]: entry["provenance"] for entry in entries},
    )
    for entry in entries:
        print(f"  {entry['agent_ref']['name']}: {entry.get('key_metrics', {})}")
