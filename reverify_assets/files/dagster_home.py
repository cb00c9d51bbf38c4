"""Where the Dagster instance lives when DAGSTER_HOME is not set, and what we keep beside it: the probes' reports,
found there by a later ``reverify run --force`` of the same config."""

from __future__ import annotations

import os
from pathlib import Path

DAGSTER_HOME_ENV = "DAGSTER_HOME"


def default_dagster_home() -> Path:
    data_home = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return data_home / "reverify-assets" / "dagster_home"


def dagster_home() -> Path:
    """DAGSTER_HOME if set, else our default; not created here."""
    return Path(os.environ.get(DAGSTER_HOME_ENV) or default_dagster_home()).expanduser().resolve()


PROBES_FOLDER = "reverify_probes"
# A few hundred rows: a stateful server shows within them, and both passes take seconds. Here, not with the probe,
# so that the command's parser has it without importing the probe's statistics.
DEFAULT_PROBE_SAMPLE = 300


def probe_report_path(config_hash: str) -> Path:
    return dagster_home() / PROBES_FOLDER / f"{config_hash}.json"
