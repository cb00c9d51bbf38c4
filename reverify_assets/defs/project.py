"""Everything the project's Dagster code location holds: the CLI pipeline and one group per rescoring."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from reverify_assets.defs.assets import ALL_ASSETS
from reverify_assets.defs.automation import new_rollouts_sensor, rescore_schedule, shard_failure_sensor
from reverify_assets.defs.rescoring_defs import RescoringDefs, build_rescoring
from reverify_assets.defs.resources import RescoringResource
from reverify_assets.rescoring.spec import load_rescorings

SAMPLE = Path("samples") / "mcqa"


def build_rescorings(root: Path) -> list[RescoringDefs]:
    return [build_rescoring(spec) for spec in load_rescorings(root)]


def build_definitions(root: Path) -> dg.Definitions:
    rescorings = build_rescorings(root)
    schedules = [s for r in rescorings if (s := rescore_schedule(r)) is not None]
    return dg.Definitions(
        assets=[*ALL_ASSETS, *(asset for r in rescorings for asset in r.assets)],
        jobs=[job for r in rescorings for job in (r.shard_job, r.aggregate_job)],
        schedules=schedules,
        sensors=[*(new_rollouts_sensor(r) for r in rescorings), shard_failure_sensor(rescorings)],
        resources={
            # Materializing the `reverify` group from the UI re-scores the bundled sample into results/ui/;
            # the CLI runs the same assets with its own paths.
            "rescoring": RescoringResource(
                config_paths=[str(root / "configs" / "mcqa.yaml")],
                inputs=str(root / SAMPLE / "rollouts_materialized_inputs.jsonl"),
                rollouts=str(root / SAMPLE / "rollouts.jsonl"),
                output=str(root / "results" / "ui" / "reverified.jsonl"),
                overwrite=True,
            )
        },
    )
