"""What keeps rescorings current without a person: discovery of new rollouts, a nightly rescore, failure reports."""

from __future__ import annotations

import time
from collections.abc import Sequence

import dagster as dg
import orjson
from dagster._utils.error import SerializableErrorInfo

from reverify_assets.defs.rescoring_defs import SHARD_TAG, RescoringDefs
from reverify_assets.defs.run_tags import RESCORING_TAG
from reverify_assets.rescoring.discovery import discover_shard_keys
from reverify_assets.rescoring.status import ShardState, shard_status

FAILURE_REPORT = "shard_run_failures.jsonl"


def aggregates_sensor(rescorings: Sequence[RescoringDefs], comparisons: Sequence[dg.AssetKey]) -> dg.SensorDefinition:
    """Evaluates the aggregates' and comparisons' automation conditions; on from the start (Dagster's default
    automation sensor waits to be switched on), so that a backfill launched from the UI ends with them."""
    return dg.AutomationConditionSensorDefinition(
        "reverify_aggregates",
        target=dg.AssetSelection.assets(*(r.aggregate_key for r in rescorings), *comparisons),
        default_status=dg.DefaultSensorStatus.RUNNING,
        minimum_interval_seconds=15,
        description="Materializes each rescoring's aggregate once all its shards are current, then the comparison.",
    )


def new_rollouts_sensor(variants: Sequence[RescoringDefs], *, interval_s: int = 60) -> dg.SensorDefinition:
    """Registers the shards of rollout files that appeared, and asks for one run per new shard and variant."""
    first = variants[0]

    @dg.sensor(
        name=f"{first.spec.name}_new_rollouts",
        jobs=[variant.shard_job for variant in variants],
        minimum_interval_seconds=interval_s,
        description="Finds new NeMo Gym rollout files of this rescoring and registers their shards.",
    )
    def sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult | dg.SkipReason:
        known = set(context.instance.get_dynamic_partitions(first.shards.name))
        found = discover_shard_keys(first.spec, first.layout.index_cache)
        new = [key for key in found if key not in known]
        if not new:
            return dg.SkipReason(f"no new shards ({len(known)} registered)")
        return dg.SensorResult(
            run_requests=[
                dg.RunRequest(
                    partition_key=variant.partition_key(key),
                    job_name=variant.shard_job.name,
                    run_key=f"{variant.label}:{key}:{variant.setup.config_hash}",
                )
                for variant in variants
                for key in new
            ],
            dynamic_partitions_requests=[first.shards.build_add_request(new)],
        )

    return sensor


def rescore_schedule(rescoring: RescoringDefs) -> dg.ScheduleDefinition | None:
    """Each tick: one run per stale or missing shard; when none is left (or running), the aggregate.

    Failed shards are not re-queued every night: a shard that fails for a lasting reason (a join gap,
    rows at their maximum attempts) would be retried for nothing and would hold the aggregate back
    for ever. The failure sensor reports them; `reverify backfill NAME --failed` retries them.
    """
    schedule_spec = rescoring.spec.schedule
    if schedule_spec is None:
        return None

    @dg.schedule(
        name=f"{rescoring.label}_rescore",
        cron_schedule=schedule_spec.cron,
        execution_timezone=schedule_spec.timezone,
        job=rescoring.shard_job,
        description="Re-scores the shards a verifier change made stale and new shards, then the aggregate.",
    )
    def schedule(context: dg.ScheduleEvaluationContext) -> Sequence[dg.RunRequest] | dg.SkipReason:
        status = shard_status(
            context.instance, rescoring.reverified_key, rescoring.shard_partitions, rescoring.setup.config_hash
        )
        todo = status.needing_work(ShardState.STALE, ShardState.MISSING)
        tick = int(context.scheduled_execution_time.timestamp()) if context.scheduled_execution_time else 0
        if todo:
            return [
                dg.RunRequest(
                    partition_key=rescoring.partition_key(key), run_key=f"{key}:{rescoring.setup.config_hash}:{tick}"
                )
                for key in todo
            ]
        if status.registered and not status.by_state[ShardState.RUNNING]:
            return [
                dg.RunRequest(
                    run_key=f"aggregate:{rescoring.setup.config_hash}:{tick}",
                    job_name=rescoring.aggregate_job.name,
                    partition_key=rescoring.aggregate_partition,
                )
            ]
        return dg.SkipReason("no shard needs work")

    return schedule


def shard_failure_sensor(rescorings: Sequence[RescoringDefs]) -> dg.SensorDefinition:
    """Says which shard failed and why: in the sensor's log and in ``<output_dir>/shard_run_failures.jsonl``."""
    by_label = {r.label: r for r in rescorings}

    @dg.run_failure_sensor(
        name="reverify_shard_failures",
        monitor_all_code_locations=False,
        description="Records the shard, run and error of every failed shard run.",
    )
    def sensor(context: dg.RunFailureSensorContext) -> None:
        run = context.dagster_run
        shard = run.tags.get(SHARD_TAG)
        # Shard runs carry the rescoring's name, whether the daemon or `reverify backfill` launched them.
        rescoring = by_label.get(run.tags.get(RESCORING_TAG, ""))
        if shard is None or rescoring is None:
            return
        errors = [
            _innermost(event.step_failure_data.error)
            for event in context.get_step_failure_events()
            if event.step_failure_data and event.step_failure_data.error
        ]
        reason = "; ".join(e for e in errors if e) or (context.failure_event.message or "unknown")
        report = {
            "shard": shard,
            "run_id": run.run_id,
            "rescoring": rescoring.spec.name,
            "error": reason,
            "at": time.time(),
        }
        context.log.error(f"shard {shard} of {rescoring.label} failed in run {run.run_id}: {reason}")
        path = rescoring.spec.outputs / FAILURE_REPORT
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "ab") as fh:  # one whole line per failure, appended
            fh.write(orjson.dumps(report) + b"\n")

    return sensor


def _innermost(error: SerializableErrorInfo) -> str:
    """Dagster wraps the step's own exception; its message is what says why the shard failed."""
    while error.cause is not None:
        error = error.cause
    return " ".join(error.message.split())
