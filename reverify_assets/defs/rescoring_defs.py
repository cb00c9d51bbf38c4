"""One asset group per rescoring in ``configs/rescorings``: sharded, stale-aware, gated by checks.

    shard_payloads ─> reverified_shard + shard_failures ─> aggregate_metrics
    └─────────── one step per partition ───────────┘
    verifier_probe (on demand: is re-scoring with this config sound?)

The shard assets are partitioned by shard × verifier config (one config: the current one). After a verifier
edit every shard is *missing* under the new config, which Dagster's partitions page, backfill dialog and
asset graph show and select like any missing partition; put the old config back and its results, kept on
disk under its hash, are current again. The three shard assets are one step (the plan depends on the
verifier's servers), so any selection of them re-plans and re-scores together.
"""

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import dagster as dg

from reverify_assets.defs.checks import (
    FAILURE_RATE,
    JOIN_COMPLETE,
    NO_DUPLICATE_KEYS,
    ONE_CONFIG,
    ROLLOUT_HEALTH,
    ROLLOUT_HEALTH_DESCRIPTION,
    STATELESS_EVIDENCE,
    check_spec,
    one_config_result,
    rollout_health_result,
    stateless_evidence_result,
)
from reverify_assets.defs.dagster_internals import UnresolvedAssetJobDefinition
from reverify_assets.defs.failures import step_failures
from reverify_assets.defs.handles import content_version
from reverify_assets.defs.metadata import (
    aggregate_metadata,
    key_metrics_table,
    probe_metadata,
)
from reverify_assets.defs.run_tags import CONFIG_TAG, RESCORING_TAG, VARIANT_TAG
from reverify_assets.defs.shard_events import join_problems, payload_events, verified_events
from reverify_assets.errors import InputError, StateError
from reverify_assets.probe.two_passes import probe_first_source
from reverify_assets.rescoring.layout import RescoringLayout
from reverify_assets.rescoring.shard_aggregate import merge_included_shards
from reverify_assets.rescoring.shard_gate import gate_shards
from reverify_assets.rescoring.shard_work import plan_shard_files, verify_shard
from reverify_assets.rescoring.spec import RescoringSpec, Schedule
from reverify_assets.rescoring.status import ShardPartitions
from reverify_assets.run.preparation import VerifierSetup, load_verifier_setup

VERIFIER_POOL = "verifier"
SHARD_DIMENSION = "shard"
CONFIG_DIMENSION = "verifier_config"
SHARD_TAG = f"dagster/partition/{SHARD_DIMENSION}"  # Dagster's own tag, one per dimension


@dataclass(frozen=True)
class RescoringDefs:
    spec: RescoringSpec
    variant: str | None
    label: str  # the rescoring's name, or <name>__<variant>: names its op, jobs and schedule
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
    """One set of assets per verifier variant, all on the same shards and in the rescoring's one group."""
    return [build_rescoring(spec, variant) for variant in spec.variant_names]


def build_rescoring(spec: RescoringSpec, variant: str | None = None) -> RescoringDefs:
    setup = load_verifier_setup(*spec.verifier_of(variant))
    layout = RescoringLayout(spec, setup.config_hash, variant)
    name = spec.name if variant is None else f"{spec.name}__{variant}"
    shards = dg.DynamicPartitionsDefinition(name=f"{spec.name}_shards")
    configs = dg.StaticPartitionsDefinition([setup.config_hash])
    partitions = dg.MultiPartitionsDefinition({SHARD_DIMENSION: shards, CONFIG_DIMENSION: configs})
    payloads_key, reverified_key, failures_key, aggregate_key, probe_key = (
        asset_key(spec, variant, asset)
        for asset in ("shard_payloads", "reverified_shard", "shard_failures", "aggregate_metrics", "verifier_probe")
    )

    def shard_check(check_name: str, asset: dg.AssetKey, description: str) -> dg.AssetCheckSpec:
        return check_spec(check_name, asset, description, partitions, blocking=True)

    @dg.multi_asset(
        name=f"{name}__rescore_shard",  # op names are global to the code location: one per rescoring
        group_name=spec.name,
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
            shard_check(JOIN_COMPLETE, payloads_key, "every rollout of the shard has its materialized input row"),
            shard_check(
                NO_DUPLICATE_KEYS, payloads_key, "no (task, rollout) key appears twice in the rollouts or inputs"
            ),
            shard_check(
                FAILURE_RATE, reverified_key, f"at most {spec.max_failure_rate:.1%} of the shard's rows failed"
            ),
        ],
    )
    @step_failures
    def rescore_shard(context: dg.AssetExecutionContext) -> Iterator[Any]:
        """Plans the shard, then every /verify call of it, asyncio in this one step."""
        shard = _shard_of(context, setup.config_hash)
        planned = plan_shard_files(layout, setup, shard)
        yield from payload_events(payloads_key, planned)
        if not planned.is_sound:  # the join checks block the verification, here in the same step
            raise InputError(f"shard {shard}: {join_problems(planned)}: not verified")
        verified = verify_shard(planned, layout, setup)
        yield from verified_events(
            reverified_key, failures_key, shard, verified, setup.config_hash, spec.max_failure_rate
        )

    @dg.asset(
        key=aggregate_key,
        group_name=spec.name,
        # One partition per verifier config, as the shards': an undone edit finds its aggregate there again.
        partitions_def=configs,
        deps=[
            dg.AssetDep(
                reverified_key,
                partition_mapping=dg.MultiToSingleDimensionPartitionMapping(partition_dimension_name=CONFIG_DIMENSION),
            )
        ],
        description="NeMo Gym's aggregate metrics over every current shard, merged in key order.",
        automation_condition=aggregate_condition(spec.schedule),
        check_specs=[
            check_spec(
                ONE_CONFIG, aggregate_key, "every merged row carries the current verifier config's hash", configs
            ),
            check_spec(ROLLOUT_HEALTH, aggregate_key, ROLLOUT_HEALTH_DESCRIPTION, configs),
        ],
    )
    @step_failures
    def aggregate_metrics(context: dg.AssetExecutionContext) -> Iterator[Any]:
        _check_config(context.partition_key, setup.config_hash)
        registered = context.instance.get_dynamic_partitions(shards.name)
        gate = gate_shards(layout, registered, spec.max_failure_rate)
        if not gate.included:
            raise StateError(f"no shard of {name!r} has results for verifier config {setup.config_hash} yet")
        merged = merge_included_shards(layout, setup, gate, registered)
        entries = merged.aggregation.entries
        metadata = aggregate_metadata(layout.merged_metrics, merged.aggregation, setup.config_hash) if entries else {}
        metadata.update(
            {
                "merged file": dg.MetadataValue.path(str(layout.merged)),
                "rows": merged.summary.rows,
                "shards included": len(gate.included),
                "shards registered": len(registered),
                "shards left out": dg.MetadataValue.json(gate.excluded),
                "key metrics": dg.MetadataValue.md(key_metrics_table(entries)),
            }
        )
        if merged.health is not None:
            metadata["rollout health"] = merged.health.lines[0]
        yield dg.Output(None, metadata=metadata, data_version=content_version(layout.merged))
        yield one_config_result(merged.summary, setup.config_hash)
        yield rollout_health_result(merged.health)

    @dg.asset(
        key=probe_key,
        group_name=spec.name,
        partitions_def=configs,
        pool=VERIFIER_POOL,
        description="`reverify probe` of this verifier config on the rescoring's first source: a sample scored "
        "twice by servers started apart, in different orders, against itself and the rewards the rollouts stored. "
        "Materialize it before trusting a rescore with servers that do not declare themselves stateless.",
        check_specs=[
            check_spec(
                STATELESS_EVIDENCE,
                probe_key,
                "the two passes agree on every sampled row (else a warning: the rescore may be unsound)",
                configs,
            )
        ],
    )
    @step_failures
    def verifier_probe(context: dg.AssetExecutionContext) -> Iterator[Any]:
        _check_config(context.partition_key, setup.config_hash)
        report, kept = probe_first_source(spec, setup)
        yield dg.Output(None, metadata=probe_metadata(report, kept))
        yield stateless_evidence_result(report)

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
        assets=[rescore_shard, aggregate_metrics, verifier_probe],
        shard_job=dg.define_asset_job(
            f"{name}_shards_job", selection=[payloads_key, reverified_key, failures_key], tags=job_tags
        ),
        aggregate_job=dg.define_asset_job(f"{name}_aggregate_job", selection=[aggregate_key], tags=job_tags),
    )


def aggregate_condition(schedule: Schedule | None) -> dg.AutomationCondition:
    """Eager, as ``reverify backfill`` ends: once every registered shard of the current config has results or its
    last run failed (a failed shard is left out, as the aggregate's gate leaves it out), at least one has results,
    and none is running, after a shard changed or the config's partition appeared. So a UI backfill of the missing
    shards ends with the aggregate, and a shard that keeps failing does not hold it back for ever.

    With a schedule, also at each of its ticks while the aggregate is missing or its last run failed: eager alone
    does not try again until a shard changes, and the schedule cannot ask for the aggregate itself (see
    ``automation.rescore_schedule``). The tick arms it; it fires once the shards the tick re-scores are done.
    """
    condition = dg.AutomationCondition
    settled = (
        ~condition.any_deps_match(condition.missing() & ~condition.execution_failed())
        & condition.any_deps_match(~condition.missing())
    ).with_label("every shard scored or failed, one scored")
    changed = condition.newly_missing() | condition.any_deps_updated()
    if schedule is not None:
        behind = condition.missing() | condition.execution_failed()
        at_tick = condition.cron_tick_passed(schedule.cron, schedule.timezone) & behind
        changed = changed | at_tick.with_label(f"behind at the rescore's tick ({schedule.cron})")
    return (
        condition.in_latest_time_window()
        & changed.since_last_handled()
        & settled
        & ~condition.any_deps_in_progress()
        & ~condition.in_progress()
    ).with_label("eager, and at the rescore's tick when behind" if schedule else "eager")


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
        raise StateError(
            f"this run asks for verifier config {asked}, but the verifier config files now give {config_hash}: "
            "reload the code location (Deployment > Reload) and launch the run again"
        )
