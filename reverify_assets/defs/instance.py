"""The Dagster instance the CLI records its runs in, shared with ``dagster dev`` through DAGSTER_HOME."""

from __future__ import annotations

import fcntl
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

from reverify_assets.errors import StateError
from reverify_assets.files.atomic import write_bytes_atomic
from reverify_assets.files.dagster_home import DAGSTER_HOME_ENV, dagster_home

if TYPE_CHECKING:  # Dagster's import takes a second: the CLI makes it in a thread of its own
    import dagster as dg

# Held while the instance is opened: the first opening of a home creates its storage, and two commands doing that
# at once (two runs started together on a new home) collide on its tables.
INSTANCE_OPENING_LOCK = ".reverify-instance.lock"
# By module, so that the driver need not be installed: dagster-postgres's give-up and the driver's own error (not
# SQLite's: "database is locked" is no unreachable server).
STORAGE_CONNECTION_MODULES = ("dagster_postgres", "psycopg2")

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
        quiet = _RetryNotices()  # each retry's traceback-sized warning: the error below says it once
        logging.getLogger().addFilter(quiet)
        try:
            return dg.DagsterInstance.get()
        except Exception as exc:
            if not _is_storage_unreachable(exc):
                raise
            raise StateError(
                f"cannot reach the Dagster instance's storage ({home / 'dagster.yaml'}): {_root_cause(exc)}",
                path=home / "dagster.yaml",
            ) from exc
        finally:
            logging.getLogger().removeFilter(quiet)


class _RetryNotices(logging.Filter):
    """dagster-postgres's notice, on the root logger, of each retry of a failed connection."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Retrying failed database connection")


def _is_storage_unreachable(exc: BaseException) -> bool:
    """dagster-postgres gives up after its retries with its own exception, the driver's error as its cause."""
    return any(type(cause).__module__.startswith(STORAGE_CONNECTION_MODULES) for cause in _causes(exc))


def _root_cause(exc: BaseException) -> str:
    *_, last = _causes(exc)
    lines = [line.strip() for line in str(last).splitlines() if line.strip()]
    return lines[0] if lines else type(last).__name__


def _causes(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = [exc]
    while (cause := chain[-1].__cause__ or chain[-1].__context__) is not None and cause not in chain:
        chain.append(cause)
    return chain
