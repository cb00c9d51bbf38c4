"""The rescoring as software-defined assets. Bodies stay thin: the work is in ``pipeline``.

materialized_inputs ─┐
                     ├─> verify_payloads ─> reverified_rows + reverify_failures ─> aggregate_metrics
rollouts ────────────┘
"""


import logging
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import polars as pl

from reverify_assets.defs.handles import (
    IndexHandle,
    OutputHandle,
    PlanHandle,
    content_version,
    work_dir,
    write_parquet_atomic,
)
from reverify_assets.defs.metadata import aggregate_metadata, verification_metadata
from reverify_assets.defs.resources import RescoringResource
from reverify_assets.lib.file_names import aggregate_metrics_path
from reverify_assets.lib.jsonl import iter_jsonl
from reverify_assets.lib.key_index import KeyIndex
from reverify_assets.pipeline.metrics_step import run_aggregation
from reverify_assets.pipeline.preparation import InputsIndex, join_and_route, scan_inputs, scan_rollouts
from reverify_assets.pipeline.verification import run_verification
from reverify_assets.pipeline.verify_loop import VerifyStats

GROUP = "reverify"
log = logging.getLogger("reverify")


@dg.asset(group_name=GROUP, description="NeMo Gym's rollouts_materialized_inputs.jsonl, indexed by key.")
def materialized_inputs(
    context: dg.AssetExecutionContext, rescoring: RescoringResource
) -> dg.Output[IndexHandle]:
    source = Path(rescoring.inputs)
    index = scan_inputs(source)
    target = work_dir(context) / "materialized_inputs.parquet"
    write_parquet_atomic(index.keys.frame.with_columns(index.route_of_row), target)
    handle = IndexHandle(source=str(source), index=str(target), rows=index.keys.rows, routes=index.routes)
    return dg.Output(
        handle,
        metadata={"file": dg.MetadataValue.path(str(source)), "rows": index.keys.rows},
        data_version=content_version(source),
    )


@dg.asset(
    group_name=GROUP,
    description="The stored rollouts (responses and their original rewards), indexed by key.",
)
def rollouts(context: dg.AssetExecutionContext, rescoring: RescoringResource) -> dg.Output[IndexHandle]:
    source = Path(rescoring.rollouts)
    index = scan_rollouts(source, limit=rescoring.limit)
    target = work_dir(context) / "rollouts.parquet"
    write_parquet_atomic(index.frame, target)
    metadata: dict[str, object] = {"file": dg.MetadataValue.path(str(source)), "rows": index.rows}
    if rescoring.limit is not None:
        metadata["limit"] = rescoring.limit
    return dg.Output(
        IndexHandle(source=str(source), index=str(target), rows=index.rows),
        metadata=metadata,
        data_version=content_version(source),
    )


@dg.asset(
    group_name=GROUP,
    description="The /verify requests: every rollout joined to its input row by (task, rollout), routed to a server.",
)
def verify_payloads(
    context: dg.AssetExecutionContext,
    rescoring: RescoringResource,
    materialized_inputs: IndexHandle,
    rollouts: IndexHandle,
) -> dg.Output[PlanHandle]:
    setup = rescoring.verifier_setup()
    inputs_frame = pl.read_parquet(materialized_inputs.index)
    inputs = InputsIndex(
        KeyIndex(Path(materialized_inputs.source), inputs_frame.drop("route")),
        inputs_frame["route"],
        materialized_inputs.routes,
    )
    plan = join_and_route(
        inputs, KeyIndex(Path(rollouts.source), pl.read_parquet(rollouts.index)), setup.topology
    )
    target = work_dir(context) / "verify_payloads.parquet"
    write_parquet_atomic(plan, target)
    per_server = plan.group_by("server").len().sort("server")
    return dg.Output(
        PlanHandle(
            inputs=materialized_inputs.source,
            rollouts=rollouts.source,
            plan=str(target),
            rows=plan.height,
            config_hash=setup.config_hash,
        ),
        metadata={
            "rows": plan.height,
            "rows by server": dg.MetadataValue.json(dict(per_server.iter_rows())),
            "verifier config hash": setup.config_hash,
        },
        data_version=content_version(target),
    )


@dg.multi_asset(
    group_name=GROUP,
    outs={
        "reverified_rows": dg.AssetOut(
            description="The reverified rows, sorted by key: the run's output file."
        ),
        "reverify_failures": dg.AssetOut(
            description="The failures sidecar: rows the verifier could not score."
        ),
    },
)
def reverify(
    context: dg.AssetExecutionContext, rescoring: RescoringResource, verify_payloads: PlanHandle
) -> Iterator[dg.Output[OutputHandle]]:
    """Every row's /verify call, asyncio inside this one step; the servers live exactly as long as it."""
    options = rescoring.options()
    result = run_verification(
        pl.read_parquet(verify_payloads.plan),
        rescoring.verifier_setup(),
        inputs=Path(verify_payloads.inputs),
        rollouts=Path(verify_payloads.rollouts),
        output=options.output,
        force=options.force,
        overwrite=options.overwrite,
        concurrency=options.concurrency,
        on_progress=_log_progress,
    )
    stats, files, config_hash = result.stats, result.files, verify_payloads.config_hash
    yield dg.Output(
        OutputHandle(path=str(files.output), rows=stats.to_output, config_hash=config_hash),
        output_name="reverified_rows",
        metadata=verification_metadata(
            files.output, stats, config_hash, result.reverify_modes, result.unsafe
        ),
        data_version=content_version(files.output),
    )
    yield dg.Output(
        OutputHandle(path=str(files.sidecar), rows=stats.to_sidecar, config_hash=config_hash),
        output_name="reverify_failures",
        metadata={
            "file": dg.MetadataValue.path(str(files.sidecar)),
            "rows": stats.to_sidecar,
            "failures by class": dg.MetadataValue.json(dict(stats.failures_by_class)),
            "verifier config hash": config_hash,
        },
        data_version=content_version(files.sidecar),
    )


@dg.asset(
    group_name=GROUP, description="NeMo Gym's _aggregate_metrics.json: one entry per agent, from its server."
)
def aggregate_metrics(
    context: dg.AssetExecutionContext, rescoring: RescoringResource, reverified_rows: OutputHandle
) -> dg.Output[OutputHandle | None]:
    output = Path(reverified_rows.path)
    target = aggregate_metrics_path(output)
    entries = run_aggregation((line.row for line in iter_jsonl(output)), rescoring.verifier_setup(), target)
    if entries is None:
        return dg.Output(None, metadata={"note": "no row carries an agent name: nothing to aggregate"})
    return dg.Output(
        OutputHandle(path=str(target), rows=reverified_rows.rows, config_hash=reverified_rows.config_hash),
        metadata=aggregate_metadata(target, entries, reverified_rows.config_hash),
        data_version=content_version(target),
    )


def _log_progress(stats: VerifyStats) -> None:
    log.info("verified %d of %d rows (%.0f rows/s)", stats.verified, stats.planned, stats.rows_per_second)


REVERIFY_ASSETS = [materialized_inputs, rollouts, verify_payloads, reverify, aggregate_metrics]
