"""One asset group per rescoring in ``configs/rescorings``: sharded, stale-aware, gated by checks.

    shard_payloads ─> reverified_shard + shard_failures ─> aggregate_metrics
    └─────────── one step per partition ───────────┘

The shard assets are partitioned by shard × verifier config (one config: the current one). After a verifier
edit every shard is *missing* under the new config, which Dagster's partitions page, backfill dialog and
asset graph show and select like any missing partition; put the old config back and its results, kept on
disk under its hash, are current again. The three shard assets are one step (the plan depends on the
verifier's servers), so any selection of them re-plans and re-scores together.
"""

import warnings
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from typing import Any

import dagster as dg
import polars as pl
from dagster._core.definitions.unresolved_asset_job_definition import UnresolvedAssetJobDefinition

from reverify_assets.defs.handles import content_version
from reverify_assets.defs.metadata import (
    aggregate_metadata,
    figure,
    key_metrics_table,
    sidecar_metadata,
    stored_flips_metadata,
)
from reverify_assets.defs.run_tags import CONFIG_TAG, RESCORING_TAG, VARIANT_TAG
from reverify_assets.lib.file_names import sidecar_path
from reverify_assets.pipeline.aggregation_rows import rows_of_shards
from reverify_assets.pipeline.coverage_count import CoverageSources
from reverify_assets.pipeline.metrics_step import run_aggregation
from reverify_assets.pipeline.output_summary import OutputSummary
from reverify_assets.pipeline.preparation import VerifierSetup, load_verifier_setup
from reverify_assets.pipeline.shard_merge import index_shards
from reverify_assets.rescoring.layout import RescoringLayout
from reverify_assets.rescoring.shard_gate import gate_shards, planned_keys
from reverify_assets.rescoring.shard_work import PlannedShard, VerifiedShard, plan_shard_files, verify_shard
from reverify_assets.rescoring.spec import RescoringSpec
from reverify_assets.rescoring.status import ShardPartitions

VERIFIER_POOL = "verifier"
JOIN_COMPLETE = "join_complete"
NO_DUPLICATE_KEYS = "no_duplicate_keys"
FAILURE_RATE = "failure_rate_within_limit"
ONE_CONFIG = "one_verifier_config"
SHARD_DIMENSION = "shard"
CONFIG_DIMENSION = "verifier_config"
SHARD_TAG = f"dagster/partition/{SHARD_DIMENSION}"  # Dagster's own tag, one per dimension


@dataclass(frozen=True)
class RescoringDefs:
    spec: RescoringSpec
    variant: str | None
    label: str  # the rescoring's name, or <name>__<variant>: names its group, op, jobs and schedule
    setup: VerifierSetup
    layout: RescoringLayout
    shards: dg.DynamicPartitionsDefinition  # registered shards, shared by every variant
    shard_partitions: ShardPartitions  # shard × this variant's current verifier config
    payloads_key: dg.AssetKey
    reverified_key: dg.AssetKey
    failures_key: dg.AssetKey
    aggregate_key: dg.AssetKey
    assets: list[dg.AssetsDefinition]
    shard_job: UnresolvedAssetJobDefinition
    aggregate_job: UnresolvedAssetJobDefinition

    @property
    def shard_asset_keys(self) -> list[dg.AssetKey]:
        return [self.payloads_key, self.reverified_key, self.failures_key]

    @property
    def aggregate_partition(self) -> str:
        return self.setup.config_hash

    def partition_key(self, shard: str) -> str:
        """The partition of ``shard`` under the current verifier config."""
        return self.shard_partitions.key(shard, self.setup.config_hash)


def build_rescoring_variants(spec: RescoringSpec) -> list[RescoringDefs]:
    """One asset group per verifier variant, all on the same shards."""
    return [build_rescoring(spec, variant) for variant in spec.variant_names]


def build_rescoring(spec: RescoringSpec, variant: str | None = None) -> RescoringDefs:
    setup = load_verifier_setup(*spec.verifier_of(variant))
    layout = RescoringLayout(spec, setup.config_hash, variant)
    name = spec.name if variant is None else f"{spec.name}__{variant}"
    shards = dg.DynamicPartitionsDefinition(name=f"{spec.name}_shards")
    configs = dg.StaticPartitionsDefinition([setup.config_hash])
    partitions = dg.MultiPartitionsDefinition({SHARD_DIMENSION: shards, CONFIG_DIMENSION: configs})
    payloads_key, reverified_key, failures_key, aggregate_key = (
        asset_key(spec, variant, asset)
        for asset in ("shard_payloads", "reverified_shard", "shard_failures", "aggregate_metrics")
    )

    def check(check_name: str, asset: dg.AssetKey, description: str) -> dg.AssetCheckSpec:
        with warnings.catch_warnings():  # partitioned checks are a preview; they say which shard they checked
            warnings.simplefilter("ignore", dg.PreviewWarning)
            return dg.AssetCheckSpec(
                check_name, asset=asset, blocking=True, description=description, partitions_def=partitions
            )

    @dg.multi_asset(
        name=f"{name}__rescore_shard",  # op names are global to the code location: one per rescoring
        group_name=name,
        partitions_def=partitions,
        pool=VERIFIER_POOL,
        specs=[
            dg.AssetSpec(
                payloads_key,
                description=f"{spec.description}\n\nOne shard's /verify requests: its rollouts joined to their "
                "inputs, routed to the verifier's servers.",
            ),
            dg.AssetSpec(
                reverified_key,
                deps=[payloads_key],
                code_version=setup.config_hash,
                description="The shard's reverified rows, sorted by key.",
            ),
            dg.AssetSpec(
                failures_key,
                deps=[payloads_key],
                code_version=setup.config_hash,
                description="The shard's failures sidecar.",
            ),
        ],
        check_specs=[
            check(JOIN_COMPLETE, payloads_key, "every rollout of the shard has its materialized input row"),
            check(NO_DUPLICATE_KEYS, payloads_key, "no (task, rollout) key appears twice in the rollouts or inputs"),
            check(FAILURE_RATE, reverified_key, f"at most {spec.max_failure_rate:.1%} of the shard's rows failed"),
        ],
    )
    def rescore_shard(context: dg.AssetExecutionContext) -> Iterator[Any]:
        """Plans the shard, then every /verify call of it, asyncio in this one step."""
        shard = _shard_of(context, setup.config_hash)
        planned = plan_shard_files(layout, setup, shard)
        yield from _payload_events(payloads_key, planned)
        if not planned.is_sound:  # the join checks block the verification, here in the same step
            raise dg.Failure(f"shard {shard}: {_join_problems(planned)}: not verified")
        verified = verify_shard(planned, layout, setup)
        yield from _verified_events(
            reverified_key, failures_key, shard, verified, setup.config_hash, spec.max_failure_rate
        )

    @dg.asset(
        key=aggregate_key,
        group_name=name,
        # One partition per verifier config, as the shards': an undone edit finds its aggregate there again.
        partitions_def=configs,
        deps=[
            dg.AssetDep(
                reverified_key,
                partition_mapping=dg.MultiToSingleDimensionPartitionMapping(partition_dimension_name=CONFIG_DIMENSION),
            )
        ],
        description="NeMo Gym's aggregate metrics over every current shard, merged in key order.",
        # Once every registered shard has results of the current config and none is running: a UI backfill of
        # the missing shards ends with the aggregate, as `reverify backfill` does.
        automation_condition=dg.AutomationCondition.eager(),
        check_specs=[
            dg.AssetCheckSpec(
                ONE_CONFIG,
                asset=aggregate_key,
                description="every merged row carries the current verifier config's hash",
            )
        ],
    )
    def aggregate_metrics(context: dg.AssetExecutionContext) -> Iterator[Any]:
        _check_config(context.partition_key, setup.config_hash)
        registered = context.instance.get_dynamic_partitions(shards.name)
        gate = gate_shards(layout, registered, spec.max_failure_rate)
        if not gate.included:
            raise dg.Failure(f"no shard of {name!r} has results for verifier config {setup.config_hash} yet")
        outputs = [layout.shard_output(shard) for shard in gate.included]
        summary = OutputSummary()  # of the merged file, counted as the metrics read it
        rows = summary.count_passing(rows_of_shards(index_shards(outputs), outputs, layout.merged))
        # The coverage counts every registered shard's plan: a shard left out is missing from the metrics, but
        # the failures of one left out for its failure rate are known (its files are sound) and count as failed.
        sidecars = [sidecar_path(layout.shard_output(shard)) for shard in [*gate.included, *gate.over_limit]]
        sources = CoverageSources.of(sidecars, planned_keys(layout, registered))
        with closing(rows):
            entries = run_aggregation(rows, setup, layout.merged_metrics, sources) or []
        metadata = aggregate_metadata(layout.merged_metrics, entries, setup.config_hash) if entries else {}
        metadata.update(
            {
                "merged file": dg.MetadataValue.path(str(layout.merged)),
                "rows": summary.rows,
                "shards included": len(gate.included),
                "shards registered": len(registered),
                "shards left out": dg.MetadataValue.json(gate.excluded),
                "key metrics": dg.MetadataValue.md(key_metrics_table(entries)),
            }
        )
        yield dg.Output(None, metadata=metadata, data_version=content_version(layout.merged))
        yield one_config_result(summary, setup.config_hash)

    # However a run of this rescoring is launched (the UI, the schedule, the CLI), it says which one it is.
    job_tags = {RESCORING_TAG: name, CONFIG_TAG: setup.config_hash, **({VARIANT_TAG: variant} if variant else {})}
    return RescoringDefs(
        spec=spec,
        variant=variant,
        label=name,
        setup=setup,
        layout=layout,
        shards=shards,
        shard_partitions=ShardPartitions(shards, partitions, SHARD_DIMENSION, CONFIG_DIMENSION),
        payloads_key=payloads_key,
        reverified_key=reverified_key,
        failures_key=failures_key,
        aggregate_key=aggregate_key,
        assets=[rescore_shard, aggregate_metrics],
        shard_job=dg.define_asset_job(
            f"{name}_shards_job", selection=[payloads_key, reverified_key, failures_key], tags=job_tags
        ),
        aggregate_job=dg.define_asset_job(f"{name}_aggregate_job", selection=[aggregate_key], tags=job_tags),
    )


def asset_key(spec: RescoringSpec, variant: str | None, asset: str) -> dg.AssetKey:
    """``<name>/<asset>``, or ``<name>/<variant>/<asset>_<variant>``: the UI labels a node by its key's last part,
    and the comparison's parents, one per variant, must not all read ``aggregate_metrics``."""
    if variant is None:
        return dg.AssetKey([spec.name, asset])
    return dg.AssetKey([spec.name, variant, f"{asset}_{variant}"])


def _shard_of(context: dg.AssetExecutionContext, config_hash: str) -> str:
    """The run's shard; refused when the run asked for another verifier config than the files now give (a UI
    whose code location was not reloaded after an edit): its results would be filed under the wrong config."""
    key = context.partition_key
    assert isinstance(key, dg.MultiPartitionKey)
    _check_config(key.keys_by_dimension[CONFIG_DIMENSION], config_hash)
    return key.keys_by_dimension[SHARD_DIMENSION]


def _check_config(asked: str, config_hash: str) -> None:
    if asked != config_hash:
        raise dg.Failure(
            f"this run asks for verifier config {asked}, but the verifier config files now give {config_hash}: "
            "reload the code location (Deployment > Reload) and launch the run again"
        )


def _payload_events(key: dg.AssetKey, planned: PlannedShard) -> Iterator[Any]:
    plan, (first, end) = planned.plan, planned.tasks
    yield dg.MaterializeResult(
        asset_key=key,
        metadata={
            "rows": plan.plan.height,
            "rollouts in shard": plan.rollouts,
            "tasks": f"{first}..{end - 1}",
            "rollouts file": dg.MetadataValue.path(str(planned.rollouts)),
            "plan": dg.MetadataValue.path(str(planned.plan_file)),
        },
        data_version=content_version(planned.plan_file),
    )
    yield dg.AssetCheckResult(
        asset_key=key,
        check_name=JOIN_COMPLETE,
        passed=plan.is_complete,
        metadata={
            "shard": planned.shard,
            "rollouts without input": plan.missing_inputs.height,
            "first": _first_keys(plan.missing_inputs),
        },
    )
    yield dg.AssetCheckResult(
        asset_key=key,
        check_name=NO_DUPLICATE_KEYS,
        passed=not plan.has_duplicates,
        metadata={
            "shard": planned.shard,
            "duplicated keys": plan.duplicate_keys.height,
            "first": _first_keys(plan.duplicate_keys),
        },
    )


def _join_problems(planned: PlannedShard) -> str:
    plan, problems = planned.plan, []
    if not plan.is_complete:
        problems.append(
            f"{JOIN_COMPLETE} failed: {plan.missing_inputs.height} rollouts without an input row "
            f"({_first_keys(plan.missing_inputs)})"
        )
    if plan.has_duplicates:
        problems.append(
            f"{NO_DUPLICATE_KEYS} failed: {plan.duplicate_keys.height} keys twice ({_first_keys(plan.duplicate_keys)})"
        )
    return "; ".join(problems)


def _verified_events(
    rows_key: dg.AssetKey,
    failures_key: dg.AssetKey,
    shard: str,
    verified: VerifiedShard,
    config_hash: str,
    limit: float,
) -> Iterator[Any]:
    result = verified.result
    metadata: dict[str, Any] = {
        "file": dg.MetadataValue.path(str(result.files.output)),
        "rows": verified.rows,
        "failures": verified.failures,
        "failures by class": dg.MetadataValue.json(dict(verified.failures_by_class.most_common())),
        "rows verified this run": result.stats.verified,
        "verifier config hash": config_hash,
    }
    if (mean := verified.whole.mean_reward(result)) is not None:
        metadata["mean reward"] = figure(mean)
    if verified.whole.flips is not None:
        metadata.update(stored_flips_metadata(verified.whole.flips))
    yield dg.MaterializeResult(asset_key=rows_key, metadata=metadata, data_version=content_version(result.files.output))
    yield dg.MaterializeResult(
        asset_key=failures_key,
        metadata=sidecar_metadata(result.files.sidecar, result.stats, config_hash),
        data_version=content_version(result.files.sidecar),
    )
    yield dg.AssetCheckResult(
        asset_key=rows_key,
        check_name=FAILURE_RATE,
        passed=verified.failure_rate <= limit,
        metadata={
            "shard": shard,
            "failure rate": figure(verified.failure_rate),
            "limit": limit,
        },
    )


def one_config_result(summary: OutputSummary, current: str) -> dg.AssetCheckResult:
    """Fails, naming the configs, when a merged row was scored by another verifier config than the current."""
    others = {config: rows for config, rows in summary.rows_by_config.items() if config != current}
    if others:
        described = ", ".join(f"{rows} by {config}" for config, rows in sorted(others.items()))
        description = f"of {summary.rows} merged rows, {described}; the current verifier config is {current}"
    else:
        description = f"all {summary.rows} merged rows were scored by the current verifier config {current}"
    return dg.AssetCheckResult(
        check_name=ONE_CONFIG,
        passed=not others,
        description=description,
        metadata={
            "current verifier config": current,
            "rows by verifier config": dg.MetadataValue.json(dict(summary.rows_by_config)),
        },
    )


def _first_keys(keys: pl.DataFrame, limit: int = 5) -> str:
    return ", ".join(f"({t}, {r})" for t, r in keys.head(limit).iter_rows()) or "none"
