"""What keeps rescorings current without a person: discovery of new rollouts, a nightly rescore, failure reports."""

from __future__ import annotations

import time
from collections.abc import Sequence

import dagster as dg
import orjson

from reverify_assets.defs.dagster_internals import SerializableErrorInfo
from reverify_assets.defs.rescoring_defs import SHARD_TAG, RescoringDefs
from reverify_assets.defs.run_tags import RESCORING_TAG
from reverify_assets.rescoring.sources import discover_shard_keys
from reverify_assets.rescoring.status import ShardState, ShardStatus, shard_status

FAILURE_REPORT = "shard_run_failures.jsonl"
AGGREGATES_SENSOR = "reverify_aggregates"
FAILURES_SENSOR = "reverify_shard_failures"


def aggregates_sensor(rescorings: Sequence[RescoringDefs], comparisons: Sequence[dg.AssetKey]) -> dg.SensorDefinition:
    """Evaluates the aggregates' and comparisons' automation conditions; on from the start (Dagster's default
    automation sensor waits to be switched on), so that a backfill launched from the UI ends with them."""
    return dg.AutomationConditionSensorDefinition(
        AGGREGATES_SENSOR,
        target=dg.AssetSelection.assets(*(r.aggregate_key for r in rescorings), *comparisons),
        default_status=dg.DefaultSensorStatus.RUNNING,
        minimum_interval_seconds=15,
        description=(
            "Materializes each rescoring's aggregate once all its shards are current (and, for a rescoring with a "
            "schedule, at its tick when the aggregate is missing or its last run failed), then the comparison of "
            f"its variants. {_on_by_default('sensor', AGGREGATES_SENSOR)}"
        ),
    )


def new_rollouts_sensor(variants: Sequence[RescoringDefs], *, interval_s: int = 60) -> dg.SensorDefinition:
    """Registers the shards of rollout files that appeared, and asks for one run per new shard and variant. On
    when the code location first loads: a rescoring's file is the wish to have its rollouts scored."""
    first = variants[0]
    name = f"{first.spec.name}_new_rollouts"

    @dg.sensor(
        name=name,
        jobs=[variant.shard_job for variant in variants],
        minimum_interval_seconds=interval_s,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=(
            f"Every {interval_s} s: registers the shards of this rescoring's rollouts that are not registered yet "
            "(new files in a watched folder, once settled; rows added to its files) and launches one run per new "
            f"shard and variant. {_on_by_default('sensor', name)}"
        ),
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
    """Each tick: one run per stale, missing or failed shard under the current verifier config; a skip, saying why,
    when there is none. On when the code location first loads: the rescoring's file asking for a schedule is the
    choice to have one.

    A schedule launches every run of its tick as its own job (the shards'), whose partitions are shard × config:
    the aggregate, one partition per config, is not a run it can ask for. The aggregate follows its shards by its
    automation condition (``aggregate_condition``): eagerly after they are scored, and at this schedule's tick when
    it is missing or its last run failed.
    """
    schedule_spec = rescoring.spec.schedule
    if schedule_spec is None:
        return None
    name = f"{rescoring.label}_rescore"

    @dg.schedule(
        name=name,
        cron_schedule=schedule_spec.cron,
        execution_timezone=schedule_spec.timezone,
        job=rescoring.shard_job,
        default_status=dg.DefaultScheduleStatus.RUNNING,
        description=(
            f"On {schedule_spec.cron} ({schedule_spec.timezone}): re-scores the shards a verifier edit left without "
            "results (stale or missing) and those whose last run failed, one run each; a tick with nothing to do is "
            f"a skip that says so. {_on_by_default('schedule', name)}"
        ),
    )
    def schedule(context: dg.ScheduleEvaluationContext) -> Sequence[dg.RunRequest] | dg.SkipReason:
        status = shard_status(
            context.instance, rescoring.reverified_key, rescoring.shard_partitions, rescoring.setup.config_hash
        )
        todo = status.needing_work(ShardState.STALE, ShardState.MISSING, ShardState.FAILED)
        if not todo:
            return dg.SkipReason(quiet_tick_reason(status, aggregate_state(context.instance, rescoring)))
        tick = int(context.scheduled_execution_time.timestamp()) if context.scheduled_execution_time else 0
        return [
            dg.RunRequest(
                partition_key=rescoring.partition_key(key), run_key=f"{key}:{rescoring.setup.config_hash}:{tick}"
            )
            for key in todo
        ]

    return schedule


def aggregate_state(instance: dg.DagsterInstance, rescoring: RescoringDefs) -> dg.AssetPartitionStatus | None:
    """The latest attempt at the aggregate of the current config (None: never attempted)."""
    partitions = dg.StaticPartitionsDefinition([rescoring.aggregate_partition])
    states = instance.get_status_by_partition(rescoring.aggregate_key, [rescoring.aggregate_partition], partitions)
    return (states or {}).get(rescoring.aggregate_partition)


def quiet_tick_reason(status: ShardStatus, aggregate: dg.AssetPartitionStatus | None) -> str:
    """Why a tick with no shard to re-score asked for no run, as its skip says in the UI."""
    config = status.config_hash
    if not status.registered:
        return f"no shards registered under config {config} yet: the new-rollouts sensor registers them"
    running = status.by_state[ShardState.RUNNING]
    if running:
        return f"{len(running)} of {len(status.registered)} shards running under config {config}, none to start"
    reason = f"all {len(status.registered)} shards current under config {config}"
    if aggregate is dg.AssetPartitionStatus.MATERIALIZED:
        return reason
    if aggregate is dg.AssetPartitionStatus.IN_PROGRESS:
        return f"{reason}; the aggregate is running"
    behind = "its last run failed" if aggregate is dg.AssetPartitionStatus.FAILED else "it has no results yet"
    return f"{reason}; the aggregate is behind ({behind}): {AGGREGATES_SENSOR} materializes it after this tick"


def shard_failure_sensor(rescorings: Sequence[RescoringDefs]) -> dg.SensorDefinition:
    """Says which shard failed and why: in the sensor's log and in ``<output_dir>/shard_run_failures.jsonl``. On
    from the start: a failure log that waits for a toggle misses the failures it exists for."""
    by_label = {r.label: r for r in rescorings}

    @dg.run_failure_sensor(
        name=FAILURES_SENSOR,
        monitor_all_code_locations=False,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=(
            f"Appends the shard, run and error of every failed shard run to <output_dir>/{FAILURE_REPORT}, however "
            f"it was launched. {_on_by_default('sensor', FAILURES_SENSOR)}"
        ),
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


def _on_by_default(kind: str, name: str) -> str:
    """What each automation's page says of its switch (docs/dagster.md has the table)."""
    return (
        f"On by default. Off: this page's toggle, or `dagster {kind} stop {name} -w workspace.yaml` with the "
        f"instance's DAGSTER_HOME (`start` turns it on again)."
    )


def _innermost(error: SerializableErrorInfo) -> str:
    """Dagster wraps the step's own exception; its message is what says why the shard failed."""
    while error.cause is not None:
        error = error.cause
    return " ".join(error.message.split())
