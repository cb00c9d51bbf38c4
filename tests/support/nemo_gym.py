"""NeMo Gym's own installation for the tests that start its servers, and the server processes we may leave behind.

`scripts/nemo_gym.sh` installs NeMo Gym 0.7.0 into the cache (`scripts/test.sh` runs it) and the tests find it
through `$REVERIFY_NEMO_GYM_PYTHON`, else at that script's default place. Without it they skip, except in CI
(`CI=true`), where a missing NeMo Gym is a failure.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from reverify_assets.gym.installation import PYTHON_ENV
from reverify_assets.gym.server_python import default_cache

ROOT = Path(__file__).resolve().parents[2]
SERVERS_DATA = ROOT / "tests" / "data" / "nemo_gym_servers"
NEMO_GYM_VERSION = "0.7.0"


def nemo_gym_python() -> Path:
    """The Python that has NeMo Gym; skips the test where there is none (fails it in CI)."""
    configured = os.environ.get(PYTHON_ENV)
    python = Path(configured) if configured else default_cache() / f"nemo-gym-{NEMO_GYM_VERSION}" / "bin" / "python"
    if not python.exists():
        message = f"NeMo Gym is not installed at {python} (scripts/nemo_gym.sh installs it)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return python


def gym_env(home: Path, python: Path) -> dict[str, str]:
    return {**os.environ, "DAGSTER_HOME": str(home), PYTHON_ENV: str(python)}


def processes_running(module: str) -> list[int]:
    """Process ids of the Pythons running ``module`` (``-m module``)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            arguments = (entry / "cmdline").read_bytes().split(b"\0") if entry.name.isdigit() else []
        except OSError:  # it ended meanwhile
            continue
        if module.encode() in arguments:
            found.append(int(entry.name))
    return found


def processes_in(folder: Path) -> list[int]:
    """Process ids of the processes whose working folder is ``folder`` (NeMo Gym's servers run in their own)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if Path(os.readlink(entry / "cwd")) == folder:
                found.append(int(entry.name))
        except OSError:
            continue  # gone, or not ours to look at
    return found
