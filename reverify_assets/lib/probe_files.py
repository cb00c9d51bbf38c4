"""Where a probe's report of a verifier config is kept: in the Dagster home, named by the config's hash, so that a
later run of the same config finds it."""

from __future__ import annotations

from pathlib import Path

from reverify_assets.lib.dagster_home import dagster_home

PROBES_FOLDER = "reverify_probes"


def probe_report_path(config_hash: str) -> Path:
    return dagster_home() / PROBES_FOLDER / f"{config_hash}.json"
