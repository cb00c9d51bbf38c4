"""A rescoring's aggregate: the current shards that pass the gate, merged in key order, and their metrics."""

from __future__ import annotations

from contextlib import closing
from dataclasses import dataclass

from reverify_assets.files.names import sidecar_path
from reverify_assets.gym.rollout_health import HealthOutcome, RolloutHealthCheck
from reverify_assets.rescoring.layout import RescoringLayout
from reverify_assets.rescoring.shard_gate import ShardGate, planned_keys
from reverify_assets.run.aggregation_rows import rows_of_shards
from reverify_assets.run.coverage_count import CoverageSources
from reverify_assets.run.metrics_step import Aggregation, run_aggregation
from reverify_assets.run.output_summary import OutputSummary
from reverify_assets.run.preparation import VerifierSetup
from reverify_assets.run.shard_merge import index_shards


@dataclass(frozen=True)
class MergedShards:
    summary: OutputSummary  # of the merged file, counted as the metrics read it
    aggregation: Aggregation  # no entries: no row carries an agent name
    health: HealthOutcome | None  # NeMo Gym's rollout health checks of the merged file; None: turned off


def merge_included_shards(
    layout: RescoringLayout, setup: VerifierSetup, gate: ShardGate, registered: list[str]
) -> MergedShards:
    """``gate.included`` merged into ``layout.merged``, with its metrics beside it. The coverage counts every
    registered shard's plan: a shard left out is missing from the metrics, but the failures of one left out
    for its failure rate are known (its files are sound) and count as failed. Then NeMo Gym's rollout health
    checks of the merged file, as ``gym eval aggregate`` runs them, unless the verifier config turns them off."""
    health_check = RolloutHealthCheck.for_config(setup.config)
    outputs = [layout.shard_output(shard) for shard in gate.included]
    summary = OutputSummary()
    rows = summary.count_passing(rows_of_shards(index_shards(outputs), outputs, layout.merged))
    sidecars = [sidecar_path(layout.shard_output(shard)) for shard in [*gate.included, *gate.over_limit]]
    sources = CoverageSources.of(sidecars, planned_keys(layout, registered))
    with closing(rows):
        aggregation = run_aggregation(rows, setup, layout.merged_metrics, sources)
    health = None if health_check is None else health_check.run([layout.merged], layout.merged.parent)
    return MergedShards(summary, aggregation or Aggregation([], {}), health)
