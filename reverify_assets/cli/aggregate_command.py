"""``reverify aggregate``: shards merged in key order, then the same metrics as the unsharded run."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from reverify_assets.errors import ReverifyError, UsageError
from reverify_assets.lib.file_names import aggregate_metrics_path
from reverify_assets.lib.jsonl import iter_jsonl
from reverify_assets.lib.shard_globs import expand_input_glob
from reverify_assets.pipeline.metrics_step import run_aggregation
from reverify_assets.pipeline.preparation import load_verifier_setup
from reverify_assets.pipeline.shard_merge import index_shards, iter_rows, write_merged

log = logging.getLogger("reverify")


def aggregate_command(args: argparse.Namespace, overrides: list[str]) -> None:
    output = Path(args.output)
    if output.suffix != ".jsonl":
        raise UsageError(f"--output must name a .jsonl file, got {output}")
    setup = load_verifier_setup([Path(p) for p in args.config], overrides)
    merge_shards = setup.config.get("merge_shards", True)
    shards = [path for path in expand_input_glob(args.input_glob) if path.resolve() != output.resolve()]
    if not shards:
        raise ReverifyError(f"No shards matched {args.input_glob!r}")
    index = index_shards(shards)
    log.info("reverify: %d rows in %d shards", index.height, len(shards))
    if merge_shards:
        write_merged(index, shards, output)
        rows = (line.row for line in iter_jsonl(output))
        print(f"Merged:  {output} ({index.height} rows, sorted by key)")
    else:
        rows = iter_rows(index, shards)
    metrics_path = aggregate_metrics_path(output)
    entries = run_aggregation(rows, setup, metrics_path)
    if entries is None:
        print("No row carries an agent name: no metrics written.")
        return
    print(f"Metrics: {metrics_path}")
    for entry in entries:
        print(f"  {entry['agent_ref']['name']}: {entry.get('key_metrics', {})}")
