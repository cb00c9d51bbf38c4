"""Where a probe's report of a verifier config is kept: in the Dagster home, named by the config's hash, so that a
later run of the same config finds it."""

from __future__ import annotations

from pathlib import Path

from reverify_assets.lib.dagster_home import dagster_home

PROBES_FOLDER = "reverify_probes"
# A few hundred rows: a stateful server shows within them, and both passes take seconds. Here, not with the probe,
# so that the command's parser has it without importing the probe's statistics.
DEFAULT_PROBE_SAMPLE = 300


def probe_report_path(config_hash: str) -> Path:
    return dagster_home() / PROBES_FOLDER / f"{config_hash}.json"
