"""Materializing a rescoring (or a judge recovery) in this process, against the instance in DAGSTER_HOME.

The run is one of the code location's jobs, ``reverify_run`` or ``reverify_judge_recovery``, its run config holding
the files and flags: the UI shows it as a run of that job and can re-execute it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg

from reverify_assets.defs.assets import ALL_ASSETS, OUTPUTS
from reverify_assets.defs.code_location import IN_PROCESS_RUN_CONFIG, run_job
from reverify_assets.defs.dagster_internals import UnresolvedAssetJobDefinition
from reverify_assets.defs.failures import command_errors
from reverify_assets.defs.handles import OutputHandle
from reverify_assets.defs.instance import open_dagster_instance
from reverify_assets.defs.log_capture import capture_deaf_to_ctrl_c
from reverify_assets.defs.resources import RescoringResource, startup_resource
from reverify_assets.defs.run_storage import RunScopedIOManager
from reverify_assets.run.startup_handoff import StartupHandoff


@dataclass(frozen=True)
class Flow:
    """Which assets one kind of run materializes, and where its results are found."""

    job_name: str
    selection: tuple[str, ...]
    verify_node: str
    rows_asset: str
    failures_asset: str
    output_asset: str
    metrics_asset: str


RESCORING_FLOW = Flow(
    "reverify_run",
    ("materialized_inputs", "rollouts", "verify_payloads", "reverified_rows", "reverify_failures"),
    verify_node="reverify",
    rows_asset="reverified_rows",
    failures_asset="reverify_failures",
    output_asset="reverified_rows",
    metrics_asset="aggregate_metrics",
)
RECOVERY_FLOW = Flow(
    "reverify_judge_recovery",
    (
        "materialized_inputs",
        "rollouts",
        "judge_failures",
        "recovery_payloads",
        "recovered_rows",
        "recovery_failures",
        "merged_rollouts",
    ),
    verify_node="recover",
    rows_asset="recovered_rows",
    failures_asset="recovery_failures",
    output_asset="merged_rollouts",
    metrics_asset="merged_aggregate_metrics",
)


def flow_job(flow: Flow) -> UnresolvedAssetJobDefinition:
    """The job a flow's runs belong to, in the code location and on the command line alike (materializing every
    asset at once would run both flows on one output)."""
    return dg.define_asset_job(flow.job_name, selection=[*flow.selection, flow.metrics_asset])


FLOW_JOBS = [flow_job(RESCORING_FLOW), flow_job(RECOVERY_FLOW)]


@dataclass(frozen=True)
class MaterializedRun:
    run_id: str
    output: OutputHandle
    failures: OutputHandle
    metrics: OutputHandle | None
    metadata: dict[str, dict[str, Any]]  # asset name -> its materialization's metadata values


def materialize_rescoring(
    rescoring: RescoringResource,
    *,
    aggregate: bool,
    tags: dict[str, str] | None = None,
    before_run: Callable[[], None] | None = None,
    startup: StartupHandoff | None = None,
) -> MaterializedRun:
    """``before_run`` is called once the instance is open, before the run is created: a check that fails
    there leaves no failed run behind. ``startup``: what the command prepared for the run."""
    flow = RECOVERY_FLOW if rescoring.judge_failed_only else RESCORING_FLOW
    selection = [*flow.selection, flow.metrics_asset] if aggregate else list(flow.selection)
    partition = rescoring.partition_key
    with open_dagster_instance() as instance:
        capture_deaf_to_ctrl_c(instance)
        if before_run is not None:
            before_run()
        instance.add_dynamic_partitions(OUTPUTS.name, [partition])  # its own history, from this run on
        with command_errors():
            result = run_job(
                flow_job(flow),
                ALL_ASSETS,
                {
                    "rescoring": RescoringResource.configure_at_launch(),
                    "startup": startup_resource(startup),
                    "io_manager": RunScopedIOManager(),
                },
                instance,
                project=Path.cwd(),
                run_config=run_config_of(rescoring),
                tags=tags or {},
                partition_key=partition,
                asset_selection=[dg.AssetKey(name) for name in selection],
            )
    metadata = {
        event.asset_key.to_user_string(): {
            name: getattr(value, "value", value) for name, value in event.materialization.metadata.items()
        }
        for event in result.get_asset_materialization_events()
        if event.asset_key is not None
    }
    return MaterializedRun(
        run_id=result.run_id,
        output=_output(result, flow, flow.output_asset),
        failures=result.output_for_node(flow.verify_node, flow.failures_asset),
        metrics=result.output_for_node(flow.metrics_asset) if aggregate else None,
        metadata=metadata,
    )


def run_config_of(rescoring: RescoringResource) -> dict[str, Any]:
    """Everything the run reads and writes, as run config: what a re-execution from the UI runs again."""
    return {**IN_PROCESS_RUN_CONFIG, "resources": {"rescoring": {"config": rescoring.model_dump()}}}


def _output(result: dg.ExecuteInProcessResult, flow: Flow, asset: str) -> OutputHandle:
    if asset == flow.rows_asset:
        return result.output_for_node(flow.verify_node, asset)
    return result.output_for_node(asset)
