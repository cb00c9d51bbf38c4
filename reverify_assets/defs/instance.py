"""The Dagster instance the CLI records its runs in, shared with ``dagster dev`` through DAGSTER_HOME."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import TYPE_CHECKING

from reverify_assets.lib.atomic_files import write_bytes_atomic
from reverify_assets.lib.dagster_home import DAGSTER_HOME_ENV, dagster_home

if TYPE_CHECKING:  # Dagster's import takes a second: the CLI makes it in a thread of its own
    import dagster as dg

# Held while the instance is opened: the first opening of a home creates its storage, and two commands doing that
# at once (two runs started together on a new home) collide on its tables.
INSTANCE_OPENING_LOCK = ".reverify-instance.lock"

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
    if not config.exists():  # whole or not at all: another command may be reading it as it appears
        write_bytes_atomic(config, DAGSTER_YAML.encode())
    os.environ[DAGSTER_HOME_ENV] = str(home)
    return home


def open_dagster_instance() -> dg.DagsterInstance:
    """The instance of ``ensure_dagster_home()``, opened by one command at a time."""
    import dagster as dg

    home = ensure_dagster_home()
    with (home / INSTANCE_OPENING_LOCK).open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        return dg.DagsterInstance.get()
