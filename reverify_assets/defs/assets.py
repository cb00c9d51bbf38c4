"""The rescoring as software-defined assets. Bodies stay thin: the work is in ``run``.

A rescoring (group ``reverify``)::

    materialized_inputs ─┐
                         ├─> verify_payloads ─> reverified_rows + reverify_failures ─> aggregate_metrics
    rollouts ────────────┘

Judge-failure recovery (group ``judge_recovery``) shares the two sources::

    judge_failures ─> recovery_payloads ─> recovered_rows + recovery_failures ─┐
    rollouts (the successes) ───────────────────────────────────────────────────┴─> merged_rollouts
                                                                                    ─> merged_aggregate_metrics
"""

import logging
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import dagster as dg
import polars as pl

from reverify_assets.defs.checks import ONE_CONFIG, check_spec, merged_configs_result
from reverify_assets.defs.failures import step_failures
from reverify_assets.defs.handles import (
    IndexHandle,
    OutputHandle,
    PlanHandle,
    content_version,
    work_dir,
)
from reverify_assets.defs.metadata import aggregate_metadata, figure, sidecar_metadata, verification_metadata
from reverify_assets.defs.resources import RescoringResource, refuse_other_partition
from reverify_assets.errors import ServerError
from reverify_assets.files.atomic import write_parquet_atomic
from reverify_assets.files.names import aggregate_metrics_path, sidecar_path, source_failures_path
from reverify_assets.files.output_lock import exclusive_output
from reverify_assets.keys.key_index import KEY_COLUMNS, KeyIndex
from reverify_assets.keys.rollout_identity import allows_prompt_mismatch
from reverify_assets.keys.sorted_output import sort_by_key
from reverify_assets.metrics.coverage import COVERAGE_FIELD, PROVENANCE_BLOCK_FIELD
from reverify_assets.recovery.judge_failures import index_judge_failures
from reverify_assets.recovery.merge import seed_successes
from reverify_assets.run.aggregation_rows import rows_of_file, rows_of_shards
from reverify_assets.run.coverage_count import CoverageSources, PlannedKeys
from reverify_assets.run.metrics_step import run_aggregation
from reverify_assets.run.output_summary import summarize_output
from reverify_assets.run.preparation import InputsIndex, join_and_route, rollouts_scan_limit
from reverify_assets.run.shard_merge import index_shards
from reverify_assets.run.startup_handoff import StartupHandoff
from reverify_assets.run.startup_prefetch import (
    hand_over_plan,
    read_plan,
    scan_rollouts,
    take_prefetched_plan,
    write_inputs_index,
)
from reverify_assets.run.unfinished_metrics import finish_command, unfinished_metrics_message
from reverify_assets.run.verification import run_verification
from reverify_assets.run.verify_loop import VerifyStats
from reverify_assets.run.whole_output import whole_output
from reverify_assets.verifier.client import AggregateMetricsFailed

RESCORING = "reverify"
RECOVERY = "judge_recovery"
# One partition per output file (its absolute path): each `reverify run` has its own history and lineage, and a
# run on other files leaves the partitions of this one, a judge recovery's among them, as they were.
OUTPUTS = dg.DynamicPartitionsDefinition(name="reverify_outputs")
# The two flows share the output partitions, so each shows partitions it never writes as missing: said where a
# user sees the count ("66% filled"), on each asset's page.
UI_OUTPUT_MISSING = (
    "`results/ui/reverified.jsonl`, which `reverify ui` lists for the launchpad until a run from the UI writes it"
)
SHARED_PARTITIONS = (
    "\n\nOne partition per output file, of `reverify run` and of judge recovery alike. Missing here by design: "
    f"{UI_OUTPUT_MISSING}."
)
RUN_PARTITIONS = (
    "\n\nOne partition per output file. Missing here by design: an output only a judge recovery wrote (its "
    f"assets are in the `judge_recovery` group), and {UI_OUTPUT_MISSING}."
)
RECOVERY_PARTITIONS = (
    "\n\nOne partition per output file. Missing here by design: every output a `reverify run` wrote that no "
    "judge recovery (`--judge-failed-only`) has completed."
)
log = logging.getLogger("reverify")


def _this_output(context: dg.AssetExecutionContext, rescoring: RescoringResource) -> None:
    refuse_other_partition(context.partition_key, "rescoring", rescoring.partition_key)


@dg.asset(
    group_name=RESCORING,
    partitions_def=OUTPUTS,
    description="NeMo Gym's rollouts_materialized_inputs.jsonl, indexed by key." + SHARED_PARTITIONS,
)
@step_failures
def materialized_inputs(
    context: dg.AssetExecutionContext, rescoring: RescoringResource, startup: dg.ResourceParam[StartupHandoff]
) -> dg.Output[IndexHandle]:
    _this_output(context, rescoring)
    source = Path(rescoring.inputs)
    target = work_dir(context) / "materialized_inputs.parquet"
    rows, routes = write_inputs_index(source, target, startup.work)
    handle = IndexHandle(source=str(source), index=str(target), rows=rows, routes=routes)
    return dg.Output(
        handle,
        metadata={"file": dg.MetadataValue.path(str(source)), "rows": rows},
        data_version=content_version(source, prefetched=startup.work),
    )


@dg.asset(
    group_name=RESCORING,
    partitions_def=OUTPUTS,
    description="The stored rollouts (responses and original rewards), indexed by key." + SHARED_PARTITIONS,
)
@step_failures
def rollouts(
    context: dg.AssetExecutionContext, rescoring: RescoringResource, startup: dg.ResourceParam[StartupHandoff]
) -> dg.Output[IndexHandle]:
    _this_output(context, rescoring)
    source = Path(rescoring.rollouts)
    # In judge recovery these rows are the successes, carried over as they are: none is re-verified.
    limit = rollouts_scan_limit(rescoring.limit, rescoring.judge_failed_only)
    index = scan_rollouts(source, startup.work, limit=limit, require_response=not rescoring.judge_failed_only)
    target = work_dir(context) / "rollouts.parquet"
    write_parquet_atomic(index.frame, target)
    return dg.Output(
        IndexHandle(source=str(source), index=str(target), rows=index.rows),
        metadata={"file": dg.MetadataValue.path(str(source)), "rows": index.rows},
        data_version=content_version(source, prefetched=startup.work),
    )


def _plan(
    context: dg.AssetExecutionContext,
    rescoring: RescoringResource,
    startup: StartupHandoff,
    inputs: IndexHandle,
    responses: IndexHandle,
    exclude: IndexHandle | None = None,
) -> dg.Output[PlanHandle]:
    setup = rescoring.verifier_setup(startup)
    limit = rollouts_scan_limit(rescoring.limit, rescoring.judge_failed_only)
    plan = take_prefetched_plan(startup.work, Path(inputs.source), Path(responses.source), limit, setup.config_hash)
    if plan is None:
        inputs_frame = pl.read_parquet(inputs.index)
        inputs_index = InputsIndex(
            KeyIndex(Path(inputs.source), inputs_frame.drop("route")), inputs_frame["route"], inputs.routes
        )
        responses_index = KeyIndex(Path(responses.source), pl.read_parquet(responses.index))
        plan = join_and_route(
            inputs_index, responses_index, setup.topology, check_prompts=not allows_prompt_mismatch(setup.config)
        )
    if exclude is not None:
        plan = plan.join(pl.read_parquet(exclude.index).select(KEY_COLUMNS), on=KEY_COLUMNS, how="anti")
    target = work_dir(context) / f"{context.asset_key.to_python_identifier()}.parquet"
    write_parquet_atomic(plan, target)
    hand_over_plan(startup.work, target, plan)
    handle = PlanHandle(
        inputs=inputs.source,
        rollouts=responses.source,
        plan=str(target),
        rows=plan.height,
        config_hash=setup.config_hash,
    )
    return dg.Output(
        handle,
        metadata={
            "rows": plan.height,
            "rows by server": dg.MetadataValue.json(dict(plan.group_by("server").len().sort("server").iter_rows())),
            "verifier config hash": setup.config_hash,
        },
        data_version=content_version(target),
    )


@dg.asset(
    group_name=RESCORING,
    partitions_def=OUTPUTS,
    description="The /verify requests: every rollout joined to its input row by (task, rollout), routed to a server."
    + RUN_PARTITIONS,
)
@step_failures
def verify_payloads(
    context: dg.AssetExecutionContext,
    rescoring: RescoringResource,
    startup: dg.ResourceParam[StartupHandoff],
    materialized_inputs: IndexHandle,
    rollouts: IndexHandle,
) -> dg.Output[PlanHandle]:
    _this_output(context, rescoring)
    return _plan(context, rescoring, startup, materialized_inputs, rollouts)


def _verify(
    rescoring: RescoringResource,
    startup: StartupHandoff,
    payloads: PlanHandle,
    names: tuple[str, str],
    *,
    against_stored: bool,
) -> Iterator[dg.Output[OutputHandle]]:
    """``against_stored``: count the output's flips against the rewards its rollouts stored."""
    step = rescoring.verify_step(responses=payloads.rollouts)
    plan = read_plan(startup.work, Path(payloads.plan))
    setup = rescoring.verifier_setup(startup)
    result = run_verification(
        plan, setup, step, on_progress=_log_progress, prestarted=startup.servers, held=startup.held_outputs
    )
    stats, files, config_hash = result.stats, result.files, payloads.config_hash
    rows_name, failures_name = names
    # A run that added to an earlier output reports the whole file, not only what it wrote.
    whole = whole_output(result, plan, step, against_stored=against_stored)
    yield dg.Output(
        OutputHandle(
            path=str(files.output),
            rows=whole.rows(result),
            config_hash=config_hash,
            written_this_run=stats.to_output,
        ),
        output_name=rows_name,
        metadata=verification_metadata(files.output, result, config_hash, whole.summary, whole.flips),
        data_version=content_version(files.output),
    )
    yield dg.Output(
        OutputHandle(path=str(files.sidecar), rows=stats.to_sidecar, config_hash=config_hash),
        output_name=failures_name,
        metadata=sidecar_metadata(files.sidecar, stats, config_hash),
        data_version=content_version(files.sidecar),
    )


@dg.multi_asset(
    group_name=RESCORING,
    partitions_def=OUTPUTS,
    outs={
        "reverified_rows": dg.AssetOut(
            description="The reverified rows, sorted by key: the run's output file." + RUN_PARTITIONS
        ),
        "reverify_failures": dg.AssetOut(
            description="The failures sidecar: rows the verifier could not score." + RUN_PARTITIONS
        ),
    },
)
@step_failures
def reverify(
    context: dg.AssetExecutionContext,
    rescoring: RescoringResource,
    startup: dg.ResourceParam[StartupHandoff],
    verify_payloads: PlanHandle,
) -> Iterator[dg.Output[OutputHandle]]:
    """Every row's /verify call, asyncio inside this one step; the servers live exactly as long as it."""
    _this_output(context, rescoring)
    names = ("reverified_rows", "reverify_failures")
    yield from _verify(rescoring, startup, verify_payloads, names=names, against_stored=True)


def _aggregate(
    rescoring: RescoringResource,
    startup: StartupHandoff,
    rows: OutputHandle,
    expected: list[PlannedKeys],
    sidecars: list[Path],
) -> dg.Output[OutputHandle | None]:
    """``expected``: the keys the run planned; ``sidecars``: where its failed rows are (see ``coverage_count``)."""
    output = Path(rows.path)
    target = aggregate_metrics_path(output)
    # Metrics stream rows in key order: a fresh output is sorted; an --append target is the user's file.
    in_key_order = rows_of_shards(index_shards([output]), [output]) if rescoring.append else rows_of_file(output)
    sources = CoverageSources.of([*sidecars, sidecar_path(output)], expected)
    try:
        with closing(in_key_order):
            aggregation = run_aggregation(
                in_key_order, rescoring.verifier_setup(startup), target, sources, prestarted=startup.servers
            )
    except AggregateMetricsFailed as exc:
        raise _unfinished(rescoring, startup, output, rows.rows, exc) from exc
    if aggregation is None:
        return dg.Output(None, metadata={"note": "no row carries an agent name: nothing to aggregate"})
    entries = aggregation.entries
    return dg.Output(
        OutputHandle(
            path=str(target),
            rows=rows.rows,
            config_hash=rows.config_hash,
            key_metrics={entry["agent_ref"]["name"]: entry.get("key_metrics", {}) for entry in entries},
            coverage={entry["agent_ref"]["name"]: entry[COVERAGE_FIELD] for entry in entries},
            provenance={entry["agent_ref"]["name"]: entry[PROVENANCE_BLOCK_FIELD] for entry in entries},
            computed_by=aggregation.computed_by,
        ),
        metadata=aggregate_metadata(target, aggregation, rows.config_hash),
        data_version=content_version(target),
    )


@dg.asset(
    group_name=RESCORING,
    partitions_def=OUTPUTS,
    description="NeMo Gym's _aggregate_metrics.json: one entry per agent, from its server." + RUN_PARTITIONS,
)
@step_failures
def aggregate_metrics(
    context: dg.AssetExecutionContext,
    rescoring: RescoringResource,
    startup: dg.ResourceParam[StartupHandoff],
    reverified_rows: OutputHandle,
    verify_payloads: PlanHandle,
) -> dg.Output[OutputHandle | None]:
    """Each entry's coverage counts the rows of ``verify_payloads`` (the join) the output lacks."""
    _this_output(context, rescoring)
    expected = PlannedKeys.read_plan(Path(verify_payloads.plan), Path(verify_payloads.inputs))
    return _aggregate(rescoring, startup, reverified_rows, [expected], [])


@dg.asset(
    group_name=RECOVERY,
    partitions_def=OUTPUTS,
    description="The source failures: judge_failed / judge_invalid rows of <rollouts stem>_failures.jsonl."
    + RECOVERY_PARTITIONS,
)
@step_failures
def judge_failures(context: dg.AssetExecutionContext, rescoring: RescoringResource) -> dg.Output[IndexHandle]:
    _this_output(context, rescoring)
    source = source_failures_path(Path(rescoring.rollouts))
    index = index_judge_failures(source, limit=rescoring.limit)
    target = work_dir(context) / "judge_failures.parquet"
    write_parquet_atomic(index.frame, target)
    return dg.Output(
        IndexHandle(source=str(source), index=str(target), rows=index.rows),
        metadata={"file": dg.MetadataValue.path(str(source)), "rows": index.rows},
        data_version=content_version(source),
    )


@dg.asset(
    group_name=RECOVERY,
    partitions_def=OUTPUTS,
    description="The /verify requests that re-judge the stored responses of the failures." + RECOVERY_PARTITIONS,
)
@step_failures
def recovery_payloads(
    context: dg.AssetExecutionContext,
    rescoring: RescoringResource,
    startup: dg.ResourceParam[StartupHandoff],
    materialized_inputs: IndexHandle,
    judge_failures: IndexHandle,
    rollouts: IndexHandle,
) -> dg.Output[PlanHandle]:
    """A key that failed the judge once and later succeeded is a success: it is carried over, never re-judged."""
    _this_output(context, rescoring)
    return _plan(context, rescoring, startup, materialized_inputs, judge_failures, exclude=rollouts)


@dg.multi_asset(
    group_name=RECOVERY,
    partitions_def=OUTPUTS,
    outs={
        "recovered_rows": dg.AssetOut(description="Rows re-judged now, appended to the output." + RECOVERY_PARTITIONS),
        "recovery_failures": dg.AssetOut(
            description="The output's sidecar: rows the judge failed again." + RECOVERY_PARTITIONS
        ),
    },
)
@step_failures
def recover(
    context: dg.AssetExecutionContext,
    rescoring: RescoringResource,
    startup: dg.ResourceParam[StartupHandoff],
    recovery_payloads: PlanHandle,
) -> Iterator[dg.Output[OutputHandle]]:
    """No reverify-mode guard: these rows were judged by this verifier once already, and failed. No flips against
    stored rewards: what these rows stored is a judge failure, not a verdict."""
    _this_output(context, rescoring)
    names = ("recovered_rows", "recovery_failures")
    yield from _verify(rescoring, startup, recovery_payloads, names=names, against_stored=False)


@dg.asset(
    group_name=RECOVERY,
    partitions_def=OUTPUTS,
    description="The output after recovery: the successes carried over verbatim plus the re-judged rows."
    + RECOVERY_PARTITIONS,
    check_specs=[
        check_spec(
            ONE_CONFIG,
            "merged_rollouts",
            "Every scored row of the merge came from one verifier config (rows of unknown provenance are reported, "
            "not judged).",
            OUTPUTS,
        )
    ],
)
@step_failures
def merged_rollouts(
    context: dg.AssetExecutionContext,
    rescoring: RescoringResource,
    startup: dg.ResourceParam[StartupHandoff],
    rollouts: IndexHandle,
    recovered_rows: OutputHandle,
) -> Iterator[dg.Output[OutputHandle] | dg.AssetCheckResult]:
    _this_output(context, rescoring)
    output = Path(recovered_rows.path)
    successes = KeyIndex(Path(rollouts.source), pl.read_parquet(rollouts.index))
    with exclusive_output(output, startup.held_outputs):
        seeded = seed_successes(successes, output)
        if not rescoring.append:  # a fresh output is ours to put in key order; an appended one is the user's file
            sort_by_key(output)
    summary = summarize_output(output)
    metadata: dict[str, object] = {
        "file": dg.MetadataValue.path(str(output)),
        "rows": summary.rows,
        "seeded this run": seeded,
        "recovered this run": recovered_rows.written_this_run,
        "rows by verifier config": dg.MetadataValue.json(dict(summary.rows_by_config)),
        "verifier config hash": recovered_rows.config_hash,
    }
    if summary.mean_reward is not None:
        metadata["mean reward"] = figure(summary.mean_reward)
    yield dg.Output(
        OutputHandle(path=str(output), rows=summary.rows, config_hash=recovered_rows.config_hash),
        metadata=metadata,
        data_version=content_version(output),
    )
    yield merged_configs_result(summary)


@dg.asset(
    group_name=RECOVERY,
    partitions_def=OUTPUTS,
    description="The aggregate metrics of the merged output, as a clean run would give." + RECOVERY_PARTITIONS,
)
@step_failures
def merged_aggregate_metrics(
    context: dg.AssetExecutionContext,
    rescoring: RescoringResource,
    startup: dg.ResourceParam[StartupHandoff],
    merged_rollouts: OutputHandle,
    rollouts: IndexHandle,
) -> dg.Output[OutputHandle | None]:
    """The run expected the successes it carried over and every key of the source sidecar: a source failure
    that was not recovered (another class, or beyond --limit) is a failed row of the merged output."""
    _this_output(context, rescoring)
    expected = PlannedKeys.from_index(pl.read_parquet(rollouts.index), Path(rollouts.source))
    source_sidecar = source_failures_path(Path(rescoring.rollouts))
    return _aggregate(rescoring, startup, merged_rollouts, [expected], [source_sidecar])


def _unfinished(
    rescoring: RescoringResource, startup: StartupHandoff, output: Path, rows: int, exc: AggregateMetricsFailed
) -> ServerError:
    """A recovery merges rows of two graders (the successes carried over): its aggregate allows mixed configs."""
    mixed = rescoring.allow_mixed_configs or rescoring.judge_failed_only
    command = finish_command(
        rescoring.config_paths, rescoring.given_overrides(startup), output, allow_mixed_configs=mixed
    )
    return ServerError(unfinished_metrics_message(str(exc), output, rows, command), server=exc.server, path=output)


def _log_progress(stats: VerifyStats) -> None:
    log.info("verified %d of %d rows (%.0f rows/s)", stats.verified, stats.planned, stats.rows_per_second)


RESCORING_ASSETS = [materialized_inputs, rollouts, verify_payloads, reverify, aggregate_metrics]
RECOVERY_ASSETS = [judge_failures, recovery_payloads, recover, merged_rollouts, merged_aggregate_metrics]
ALL_ASSETS = [*RESCORING_ASSETS, *RECOVERY_ASSETS]
