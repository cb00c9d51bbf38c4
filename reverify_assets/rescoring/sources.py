"""The pairs of NeMo Gym files a rescoring reads (one fixed pair, or every pair found in a watched folder), and
the shard keys they hold right now."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from reverify_assets.errors import InputError
from reverify_assets.files.names import MATERIALIZED_INPUTS_SUFFIX
from reverify_assets.rescoring.index_cache import IndexCache
from reverify_assets.rescoring.shard_keys import shard_key, source_id
from reverify_assets.rescoring.shard_plan import shard_numbers
from reverify_assets.rescoring.spec import RescoringSpec

FIXED_SOURCE = "main"


@dataclass(frozen=True)
class Source:
    id: str
    inputs: Path
    rollouts: Path


def inputs_beside(rollouts: Path) -> Path:
    """``gym eval run`` writes ``<stem>_materialized_inputs.jsonl`` next to ``<stem>.jsonl``."""
    return rollouts.with_name(f"{rollouts.stem}{MATERIALIZED_INPUTS_SUFFIX}.jsonl")


def discover_sources(spec: RescoringSpec) -> list[Source]:
    if spec.sources is not None:
        return [Source(FIXED_SOURCE, spec.path(spec.sources.inputs), spec.path(spec.sources.rollouts))]
    assert spec.watch is not None
    folder = spec.path(spec.watch.folder)
    found = []
    settled_before = time.time() - spec.watch.settle_s
    for rollouts in sorted(folder.glob(spec.watch.pattern)):
        inputs = inputs_beside(rollouts)
        complete = rollouts.is_file() and inputs.is_file()
        # A pair still being written is picked up once it has been quiet for settle_s.
        if complete and max(rollouts.stat().st_mtime, inputs.stat().st_mtime) <= settled_before:
            relative = rollouts.parent.relative_to(folder).as_posix()
            found.append(Source(source_id(relative if relative != "." else rollouts.stem), inputs, rollouts))
    by_id: dict[str, Path] = {}
    for source in found:
        if (other := by_id.setdefault(source.id, source.rollouts)) != source.rollouts:
            raise InputError(
                f"rescoring {spec.name!r}: {other} and {source.rollouts} both become shard source {source.id!r}; "
                "rename one of their folders (shard keys keep only letters, digits, '_' and '-')",
                path=source.rollouts,
            )
    return found


def source_by_id(spec: RescoringSpec, wanted: str) -> Source:
    for source in discover_sources(spec):
        if source.id == wanted:
            return source
    raise FileNotFoundError(f"rescoring {spec.name!r} has no source {wanted!r} any more")


def discover_shard_keys(spec: RescoringSpec, cache: IndexCache) -> list[str]:
    keys = []
    for source in discover_sources(spec):
        keys.extend(shard_key(source.id, n) for n in shard_numbers(cache.rollouts(source.rollouts), spec.shard_tasks))
    return keys
