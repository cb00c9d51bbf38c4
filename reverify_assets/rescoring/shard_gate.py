"""Which shards' results go into a rescoring's aggregate, and the keys its coverage expects."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from reverify_assets.errors import ReverifyError
from reverify_assets.files.names import sidecar_path
from reverify_assets.keys.key_index import KEY_COLUMNS, scan_keys
from reverify_assets.rescoring.layout import RescoringLayout
from reverify_assets.rescoring.shard_keys import parse_shard_key
from reverify_assets.rescoring.sources import discover_sources
from reverify_assets.resume.failed_keys import count_by_class, read_failed_keys
from reverify_assets.resume.settled_keys import KEY_SCHEMA
from reverify_assets.run.coverage_count import PlannedKeys


@dataclass
class ShardGate:
    included: list[str] = field(default_factory=list)  # current results, failure rate within the limit
    excluded: dict[str, str] = field(default_factory=dict)  # the others, with the reason
    over_limit: list[str] = field(default_factory=list)  # of those, the ones left out for their failure rate


def gate_shards(layout: RescoringLayout, registered: list[str], limit: float) -> ShardGate:
    gate = ShardGate()
    for shard in registered:
        output = layout.shard_output(shard)
        if not output.exists():
            gate.excluded[shard] = "no results for this verifier config"
            continue
        try:
            rows, failed = count_lines(output), unresolved_failures(output).total()
        except ReverifyError as exc:  # one damaged shard is left out, not the whole aggregate failed
            gate.excluded[shard] = str(exc)
            continue
        if failed / max(1, rows + failed) > limit:
            gate.excluded[shard] = f"{failed} failed rows of {rows + failed} is over the limit of {limit:.1%}"
            gate.over_limit.append(shard)
            continue
        gate.included.append(shard)
    return gate


def planned_keys(layout: RescoringLayout, shards: list[str]) -> list[PlannedKeys] | None:
    """The keys every registered shard planned; None (unknown) when a shard has no plan for this config yet."""
    inputs = {source.id: source.inputs for source in discover_sources(layout.spec)}
    planned = []
    for shard in shards:
        plan, source = layout.plan(shard), parse_shard_key(shard)[0]
        if not plan.exists() or source not in inputs:
            return None
        planned.append(PlannedKeys.read_plan(plan, Path(inputs[source])))
    return planned


def unresolved_failures(output: Path) -> Counter[str]:
    """Keys of the sidecar that no later attempt scored, by their last attempt's class: a key fails once per
    attempt, and counts once."""
    failed = read_failed_keys(sidecar_path(output))
    if failed and output.exists() and output.stat().st_size:
        keys = pl.DataFrame({"task": [k[0] for k in failed], "rollout": [k[1] for k in failed]}, schema=KEY_SCHEMA)
        scored = keys.join(scan_keys(output).frame.select(KEY_COLUMNS), on=KEY_COLUMNS, how="semi")
        for key in scored.iter_rows():
            del failed[key]
    return count_by_class(failed.values())


def count_lines(path: Path) -> int:
    if not path.exists():
        return 0
    with open(path, "rb") as fh:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))
