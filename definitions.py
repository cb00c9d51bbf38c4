"""The Dagster code location: ``dagster dev -w workspace.yaml`` (with the CLI's DAGSTER_HOME) loads this."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from reverify_assets.defs.assets import ALL_ASSETS
from reverify_assets.defs.resources import RescoringResource

ROOT = Path(__file__).resolve().parent
SAMPLE = ROOT / "samples" / "mcqa"

# Materializing from the UI re-scores the bundled sample; the CLI runs the same assets with its own paths.
defs = dg.Definitions(
    assets=ALL_ASSETS,
    resources={
        "rescoring": RescoringResource(
            config_paths=[str(ROOT / "configs" / "mcqa.yaml")],
            inputs=str(SAMPLE / "rollouts_materialized_inputs.jsonl"),
            rollouts=str(SAMPLE / "rollouts.jsonl"),
            output=str(ROOT / "results" / "ui" / "reverified.jsonl"),
            overwrite=True,
        )
    },
)
