"""The shard keys a rescoring's sources hold right now (indexes come from the cache after the first look)."""

from __future__ import annotations

from reverify_assets.rescoring.index_cache import IndexCache
from reverify_assets.rescoring.shard_keys import shard_key
from reverify_assets.rescoring.shard_plan import shard_numbers
from reverify_assets.rescoring.sources import discover_sources
from reverify_assets.rescoring.spec import RescoringSpec


def discover_shard_keys(spec: RescoringSpec, cache: IndexCache) -> list[str]:
    keys = []
    for source in discover_sources(spec):
        keys.extend(shard_key(source.id, n) for n in shard_numbers(cache.rollouts(source.rollouts), spec.shard_tasks))
    return keys
