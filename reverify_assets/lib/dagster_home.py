"""Where the Dagster instance lives when DAGSTER_HOME is not set: shared by the runs and what sits beside them."""

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
