"""Where the user's NeMo Gym is: the folder holding its servers, and a Python that has ``nemo_gym``.

Looked for in this order, and every place looked at is named when nothing is found:
- the Python: ``nemo_gym_python`` in the config, else ``$REVERIFY_NEMO_GYM_PYTHON``, else the interpreter of the
  ``gym`` command on PATH, else ``./.venv/bin/python`` of a NeMo Gym checkout we run from;
- the root (the folder holding ``resources_servers/``): ``nemo_gym_root`` in the config, else
  ``$REVERIFY_NEMO_GYM_ROOT``, else where that Python imports the ``resources_servers`` package from (a wheel
  install), else the current folder when it holds ``resources_servers/`` (a NeMo Gym checkout).
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reverify_assets.config.sources import UNTRACKED, ConfigSources
from reverify_assets.config.topology import RESOURCES_SERVERS
from reverify_assets.errors import ConfigError

ROOT_KEY, ROOT_ENV = "nemo_gym_root", "REVERIFY_NEMO_GYM_ROOT"
PYTHON_KEY, PYTHON_ENV = "nemo_gym_python", "REVERIFY_NEMO_GYM_PYTHON"
SETTINGS_KEYS = frozenset({ROOT_KEY, PYTHON_KEY})  # top-level config keys that are ours, not NeMo Gym's

# Run by the candidate Python: find_spec locates a package without importing it (nemo_gym's import takes seconds).
_PROBE = """
import importlib.util, json, site, sys
gym = importlib.util.find_spec("nemo_gym")
servers = importlib.util.find_spec("resources_servers")
print(json.dumps({
    "nemo_gym": gym.origin if gym else None,
    "resources_servers": list(servers.submodule_search_locations or []) if servers else [],
    "site_packages": site.getsitepackages(),
    "version": "%d.%d" % sys.version_info[:2],
}))
"""


@dataclass(frozen=True)
class PythonProbe:
    has_nemo_gym: bool
    servers_folders: tuple[Path, ...]
    site_packages: tuple[Path, ...]
    version: str  # "3.13"


@dataclass(frozen=True)
class NemoGymInstallation:
    root: Path  # holds resources_servers/ (and responses_api_models/)
    python: Path
    probe: PythonProbe


def find_installation(
    config: Mapping[str, Any], *, cwd: Path | None = None, sources: ConfigSources = UNTRACKED
) -> NemoGymInstallation:
    """``sources``: who set the values of ``config``, for an error about a setting to name."""
    cwd = Path.cwd() if cwd is None else cwd
    looked: list[str] = []
    python, probe = find_python(config, cwd, looked, sources)
    root = _find_root(config, cwd, probe, looked, sources)
    if python is None or probe is None:
        raise _not_found("a Python that has nemo_gym", looked, f"{PYTHON_KEY}: /path/to/python", PYTHON_ENV)
    if root is None:
        raise _not_found("NeMo Gym's resources_servers folder", looked, f"{ROOT_KEY}: /path/to/Gym", ROOT_ENV)
    return NemoGymInstallation(root, python, probe)


def _configured(config: Mapping[str, Any], key: str, env: str, sources: ConfigSources) -> tuple[str, str] | None:
    """The setting and where it came from, or None."""
    if config.get(key):
        return str(config[key]), f"config key {sources.name([key])}"
    if os.environ.get(env):
        return os.environ[env], f"${env}"
    return None


def _at_fault(config: Mapping[str, Any], key: str, env: str, sources: ConfigSources) -> tuple[str, str | None]:
    """The config key or the variable ``_configured`` took the setting from, and the file or override that set it."""
    return (key, sources.set_by([key])) if config.get(key) else (env, None)


def find_python(
    config: Mapping[str, Any], cwd: Path, looked: list[str], sources: ConfigSources = UNTRACKED
) -> tuple[Path | None, PythonProbe | None]:
    """A Python that has ``nemo_gym``, or None, None with every place looked at added to ``looked``. A configured
    one that is not is an error."""
    configured = _configured(config, PYTHON_KEY, PYTHON_ENV, sources)
    if configured is not None:
        value, source = configured
        python = Path(value).expanduser()
        probe = probe_python(python) if _is_executable(python) else None
        if probe is None or not probe.has_nemo_gym:
            problem = "is not an executable Python" if probe is None else "cannot import nemo_gym"
            at_fault, set_by = _at_fault(config, PYTHON_KEY, PYTHON_ENV, sources)
            raise ConfigError(f"{source} names {python}, which {problem}", key=at_fault, source=set_by)
        return python, probe
    candidates: list[tuple[Path, str]] = []
    if (gym := shutil.which("gym")) is not None and (interpreter := _script_interpreter(Path(gym))) is not None:
        candidates.append((interpreter, f"the interpreter of `gym` on PATH ({gym})"))
    else:
        looked.append("`gym` on PATH: not found")
    checkout_python = cwd / ".venv" / "bin" / "python"
    candidates.append((checkout_python, str(checkout_python)))
    for python, description in candidates:
        probe = probe_python(python) if _is_executable(python) else None
        if probe is not None and probe.has_nemo_gym:
            return python, probe
        looked.append(f"{description}: {'no nemo_gym' if probe else 'not there'}")
    looked.append(f"{PYTHON_KEY} (config) and ${PYTHON_ENV}: not set")
    return None, None


def _find_root(
    config: Mapping[str, Any], cwd: Path, probe: PythonProbe | None, looked: list[str], sources: ConfigSources
) -> Path | None:
    configured = _configured(config, ROOT_KEY, ROOT_ENV, sources)
    if configured is not None:
        value, source = configured
        root = Path(value).expanduser().resolve()
        if not (root / RESOURCES_SERVERS).is_dir():
            at_fault, set_by = _at_fault(config, ROOT_KEY, ROOT_ENV, sources)
            raise ConfigError(
                f"{source} names {root}, which holds no {RESOURCES_SERVERS}/ folder", key=at_fault, source=set_by
            )
        return root
    looked.append(f"{ROOT_KEY} (config) and ${ROOT_ENV}: not set")
    if probe is not None:
        for folder in probe.servers_folders:
            if folder.is_dir():
                return folder.parent
        looked.append("the resources_servers package of that Python: not importable")
    if (cwd / RESOURCES_SERVERS).is_dir():
        return cwd.resolve()
    looked.append(f"{cwd / RESOURCES_SERVERS}: not there")
    return None


def _not_found(what: str, looked: list[str], key_example: str, env: str) -> ConfigError:
    places = "".join(f"\n  - {place}" for place in looked)
    return ConfigError(
        f"cannot find {what}, which starting NeMo Gym's own resources servers needs. Looked at:{places}\n"
        f"Install NeMo Gym (pip install nemo-gym), run from a NeMo Gym checkout, or point to one with "
        f"`{key_example}` at the top level of a --config file (or ++{key_example.replace(': ', '=')}), "
        f"or ${env}",
        key=key_example.partition(":")[0],  # the setting that would say where: none is set
    )


@functools.lru_cache(maxsize=8)
def probe_python(python: Path) -> PythonProbe | None:
    try:
        done = subprocess.run(
            # From /, so that the folder we run in cannot shadow what the Python itself imports.
            [str(python), "-c", _PROBE],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            cwd="/",
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    found = json.loads(done.stdout)
    return PythonProbe(
        has_nemo_gym=found["nemo_gym"] is not None,
        servers_folders=tuple(Path(folder) for folder in found["resources_servers"]),
        site_packages=tuple(Path(folder) for folder in found["site_packages"]),
        version=found["version"],
    )


def _is_executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _script_interpreter(script: Path) -> Path | None:
    """The Python a console script such as ``gym`` runs: its ``#!`` line, as pip writes it."""
    try:
        with script.open("rb") as fp:
            first = fp.readline(4096)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    words = first[2:].decode(errors="replace").split()
    return Path(words[0]) if len(words) == 1 else None
