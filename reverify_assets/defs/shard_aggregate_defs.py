"""``reverify aggregate`` as a run of the code location's job ``reverify_aggregate``: shard outputs merged in key
order, with the same metrics as the unsharded run. One partition per merged output (its absolute path), so each
has its own history; the run config holds the glob and flags, so the UI can re-execute it."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg

from reverify_assets.defs.checks import ROLLOUT_HEALTH, ROLLOUT_HEALTH_DESCRIPTION, check_spec, rollout_health_result
from reverify_assets.defs.code_location import IN_PROCESS_RUN_CONFIG, run_job
from reverify_assets.defs.failures import command_errors, step_failures
from reverify_assets.defs.handles import MergedShardsHandle, content_version
from reverify_assets.defs.instance import open_dagster_instance
from reverify_assets.defs.log_capture import capture_deaf_to_ctrl_c
from reverify_assets.defs.metadata import aggregate_metadata
from reverify_assets.defs.resources import ShardAggregateResource, refuse_other_partition, startup_resource
from reverify_assets.defs.run_storage import RunScopedIOManager
from reverify_assets.files.names import aggregate_metrics_path
from reverify_assets.metrics.coverage import COVERAGE_FIELD, PROVENANCE_BLOCK_FIELD
from reverify_assets.run.shard_aggregation import aggregate_shards
from reverify_assets.run.startup_handoff import StartupHandoff

MERGED_OUTPUTS = dg.DynamicPartitionsDefinition(name="reverify_merged_outputs")
AGGREGATE_JOB_NAME = "reverify_aggregate"
SHARD_AGGREGATE_RESOURCE = "shard_aggregate"


@dg.asset(
    group_name="reverify_aggregate",
    partitions_def=MERGED_OUTPUTS,
    description="Shard outputs merged in key order into one output, and NeMo Gym's aggregate metrics of it.",
    check_specs=[check_spec(ROLLOUT_HEALTH, "aggregated_shards", ROLLOUT_HEALTH_DESCRIPTION, MERGED_OUTPUTS)],
)
@step_failures
def aggregated_shards(
    context: dg.AssetExecutionContext,
    shard_aggregate: ShardAggregateResource,
    startup: dg.ResourceParam[StartupHandoff],
) -> Iterator[Any]:
    refuse_other_partition(context.partition_key, SHARD_AGGREGATE_RESOURCE, shard_aggregate.partition_key)
    setup = shard_aggregate.verifier_setup(startup)
    made = aggregate_shards(
        shard_aggregate.input_glob,
        Path(shard_aggregate.output),
        setup,
        startup.work,
        allow_mixed_configs=shard_aggregate.allow_mixed_configs,
        held=startup.held_outputs,
    )
    aggregation = made.aggregation
    entries = aggregation.entries if aggregation is not None else []
    handle = MergedShardsHandle(
        output=str(made.output),
        metrics=None if aggregation is None else str(aggregate_metrics_path(made.output)),
        rows=made.rows,
        shards=made.shards,
        merged=made.merged,
        key_metrics={entry["agent_ref"]["name"]: entry.get("key_metrics", {}) for entry in entries},
        coverage={entry["agent_ref"]["name"]: entry[COVERAGE_FIELD] for entry in entries},
        provenance={entry["agent_ref"]["name"]: entry[PROVENANCE_BLOCK_FIELD] for entry in entries},
        computed_by=aggregation.computed_by if aggregation is not None else {},
        health=list(made.health.lines) if made.health is not None else [],
    )
    metadata = {"rows": made.rows, "shards": made.shards, "merged file": dg.MetadataValue.path(str(made.output))}
    if aggregation is not None:
        metrics = aggregate_metrics_path(made.output)
        metadata |= aggregate_metadata(metrics, aggregation, setup.config_hash)
        yield dg.Output(handle, metadata=metadata, data_version=content_version(metrics))
    elif made.output.exists():
        yield dg.Output(handle, metadata=metadata, data_version=content_version(made.output))
    else:  # merge_shards=false, and no row names an agent: nothing was written to give a version
        yield dg.Output(handle, metadata=metadata)
    yield rollout_health_result(made.health)


AGGREGATE_JOB = dg.define_asset_job(AGGREGATE_JOB_NAME, selection=[aggregated_shards.key])


def aggregate_in_process(
    resource: ShardAggregateResource, tags: dict[str, str], startup: StartupHandoff
) -> tuple[str, MergedShardsHandle]:
    """One run of ``reverify_aggregate`` in this process, recorded as the code location's: its id and result.
    ``startup``: what the command prepared for it (the shards' index)."""
    partition = resource.partition_key
    with open_dagster_instance() as instance:
        capture_deaf_to_ctrl_c(instance)
        instance.add_dynamic_partitions(MERGED_OUTPUTS.name, [partition])
        with command_errors():
            result = run_job(
                AGGREGATE_JOB,
                [aggregated_shards],
                {
                    SHARD_AGGREGATE_RESOURCE: ShardAggregateResource.configure_at_launch(),
                    "startup": startup_resource(startup),
                    "io_manager": RunScopedIOManager(),
                },
                instance,
                project=Path.cwd(),
                run_config={
                    **IN_PROCESS_RUN_CONFIG,
                    "resources": {SHARD_AGGREGATE_RESOURCE: {"config": resource.model_dump()}},
                },
                tags=tags,
                partition_key=partition,
            )
    return result.run_id, result.output_for_node(aggregated_shards.op.name)
