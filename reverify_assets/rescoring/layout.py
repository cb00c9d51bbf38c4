"""Where one rescoring keeps its files, for one verifier config.

Results sit under ``<output_dir>[/<variant>]/<config hash>/``: those of an older verifier config stay beside
the new ones instead of being overwritten, and are current again when that config comes back.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from reverify_assets.rescoring.index_cache import IndexCache
from reverify_assets.rescoring.spec import RescoringSpec


@dataclass(frozen=True)
class RescoringLayout:
    spec: RescoringSpec
    config_hash: str
    variant: str | None = None

    @property
    def results(self) -> Path:
        variant_dir = self.spec.outputs / self.variant if self.variant else self.spec.outputs
        return variant_dir / self.config_hash

    def shard_output(self, shard: str) -> Path:
        return self.results / "shards" / f"{shard}.jsonl"

    def plan(self, shard: str) -> Path:
        return self.results / "plans" / f"{shard}.parquet"

    @property
    def merged(self) -> Path:
        return self.results / "merged.jsonl"

    @property
    def merged_metrics(self) -> Path:
        return self.merged.with_name("merged_aggregate_metrics.json")

    @property
    def index_cache(self) -> IndexCache:
        return IndexCache(self.spec.outputs / "index_cache")
