"""The Dagster instance the CLI records its runs in, shared with ``dagster dev`` through DAGSTER_HOME."""

from __future__ import annotations

import os
from pathlib import Path

from reverify_assets.lib.dagster_home import DAGSTER_HOME_ENV, dagster_home

DAGSTER_YAML = """\
# Written by reverify on first use. Local SQLite storage; see docs for PostgreSQL.
telemetry:
  enabled: false
nux:
  enabled: false
"""


def ensure_dagster_home() -> Path:
    """DAGSTER_HOME if set, else our default (exported, so child processes and the UI agree)."""
    home = dagster_home()
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    if not config.exists():
        config.write_text(DAGSTER_YAML)
    os.environ[DAGSTER_HOME_ENV] = str(home)
    return home
