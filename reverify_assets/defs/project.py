"""Everything the project's Dagster code location holds: the CLI's assets and one group per rescoring."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from reverify_assets.defs.assets import ALL_ASSETS, OUTPUTS
from reverify_assets.defs.automation import (
    aggregates_sensor,
    new_rollouts_sensor,
    rescore_schedule,
    shard_failure_sensor,
)
from reverify_assets.defs.comparison_defs import build_comparison
from reverify_assets.defs.deployment import deployment_executor
from reverify_assets.defs.materialization import FLOW_JOBS
from reverify_assets.defs.rescoring_defs import RescoringDefs, build_rescoring_variants
from reverify_assets.defs.resources import (
    RescoringResource,
    ShardAggregateResource,
    startup_resource,
)
from reverify_assets.defs.run_storage import RunScopedIOManager
from reverify_assets.defs.shard_aggregate_defs import AGGREGATE_JOB, SHARD_AGGREGATE_RESOURCE, aggregated_shards
from reverify_assets.files.names import output_partition_key
from reverify_assets.rescoring.spec import load_rescorings

SAMPLE = Path("samples") / "mcqa"
UI_OUTPUT = Path("results") / "ui" / "reverified.jsonl"  # what the `reverify` group writes launched from the UI
WORKING_DIRECTORY_LOCATION = "project_in_working_directory"  # below, for a project without a definitions file


def build_rescorings(root: Path) -> list[list[RescoringDefs]]:
    """Per rescoring file, its variants (one when it names none)."""
    return [build_rescoring_variants(spec) for spec in load_rescorings(root)]


def build_definitions(root: Path) -> dg.Definitions:
    per_file = build_rescorings(root)
    rescorings = [variant for variants in per_file for variant in variants]
    schedules = [s for r in rescorings if (s := rescore_schedule(r)) is not None]
    comparisons = [c for variants in per_file if (c := build_comparison(variants)) is not None]
    return dg.Definitions(
        assets=[
            *ALL_ASSETS,
            aggregated_shards,
            *(asset for r in rescorings for asset in r.assets),
            *(c.asset for c in comparisons),
        ],
        jobs=[
            # What `reverify run`, `reverify run --judge-failed-only` and `reverify aggregate` run, launchable and
            # re-executable here.
            *FLOW_JOBS,
            AGGREGATE_JOB,
            *(job for r in rescorings for job in (r.shard_job, r.aggregate_job)),
            *(c.job for c in comparisons),
        ],
        schedules=schedules,
        executor=deployment_executor(),  # None: Dagster's default; Celery workers if the deployment says so
        sensors=[
            *(new_rollouts_sensor(variants) for variants in per_file),
            shard_failure_sensor(rescorings),
            aggregates_sensor(rescorings, [c.key for c in comparisons]),
        ],
        resources={
            "io_manager": RunScopedIOManager(),
            "startup": startup_resource(),  # a run launched here has no command's start-up: it does its own
            # Materializing the `reverify` group from the UI re-scores the bundled sample into results/ui/;
            # the CLI runs the same assets with its own paths.
            "rescoring": RescoringResource(
                config_paths=[str(root / "configs" / "mcqa.yaml")],
                inputs=str(root / SAMPLE / "rollouts_materialized_inputs.jsonl"),
                rollouts=str(root / SAMPLE / "rollouts.jsonl"),
                output=str(root / UI_OUTPUT),
                overwrite=True,
            ),
            SHARD_AGGREGATE_RESOURCE: ShardAggregateResource.configure_at_launch(),  # each run names its shards
        },
    )


@dg.definitions
def project_in_working_directory() -> dg.Definitions:
    """The code location of a project folder without a ``definitions.py`` of its own (its ``configs/`` and data
    only), loaded in that folder: what ``reverify backfill --parallel`` runs such a project's shards as."""
    return build_definitions(Path.cwd())


def register_ui_output(root: Path, instance: dg.DagsterInstance) -> str:
    """The partition the UI's own runs of the ``reverify`` group write (the bundled sample's), so that the
    launchpad offers it."""
    key = output_partition_key(root / UI_OUTPUT)
    instance.add_dynamic_partitions(OUTPUTS.name, [key])
    return key
