"""The Dagster instance the CLI records its runs in, shared with ``dagster dev`` through DAGSTER_HOME."""

from __future__ import annotations

import os
from pathlib import Path

DAGSTER_YAML = """\
# Written by reverify on first use. Local SQLite storage; see docs for PostgreSQL.
telemetry:
  enabled: false
nux:
  enabled: false
"""


def default_dagster_home() -> Path:
    data_home = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return data_home / "reverify-assets" / "dagster_home"


def ensure_dagster_home() -> Path:
    """DAGSTER_HOME if set, else our default (exported, so child processes and the UI agree)."""
    home = Path(os.environ.get("DAGSTER_HOME") or default_dagster_home()).expanduser().resolve()
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    if not config.exists():
        config.write_text(DAGSTER_YAML)
    os.environ["DAGSTER_HOME"] = str(home)
    return home
