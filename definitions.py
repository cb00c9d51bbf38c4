"""The Dagster code location: ``dagster dev -w workspace.yaml`` (with the CLI's DAGSTER_HOME) loads this."""

from __future__ import annotations

from pathlib import Path

from reverify_assets.defs.project import build_definitions

defs = build_definitions(Path(__file__).resolve().parent)
