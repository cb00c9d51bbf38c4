"""Which Python runs one of NeMo Gym's servers, building it once from the server's requirements if need be.

A server names what it needs in ``requirements.txt`` or, for a few, in its ``pyproject.toml``'s
``[project].dependencies``, as NeMo Gym reads them. In order: the server's own ``.venv`` (NeMo Gym builds one per
server); the NeMo Gym Python itself when the server's requirements add nothing to ``nemo_gym``; else a venv of
ours holding only what the requirements add,
whose ``.pth`` file puts the NeMo Gym Python's site-packages behind its own, so nemo-gym (1.4 GB) is not installed
again per server. That venv is cached by the content of the requirements and the base Python, and built under a
lock with a completion marker: two runs at once build it once, and a build that died is started afresh.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import re
import shutil
import subprocess
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from reverify_assets.errors import ServerError
from reverify_assets.gym.installation import NemoGymInstallation

log = logging.getLogger("reverify")

# NeMo Gym's own requirement on itself (`-e nemo-gym[dev] @ ../../`): the installed nemo-gym stands for it.
_NEMO_GYM_REQUIREMENT = re.compile(r"^(-e\s+)?nemo[-_]gym\b", re.IGNORECASE)
READY_MARKER = ".reverify-ready"
CACHE_ENV = "REVERIFY_CACHE_DIR"


def added_requirements(text: str) -> list[str]:
    """The lines of a requirements.txt that ask for more than nemo-gym itself (comments and blanks dropped)."""
    added = []
    for line in text.splitlines():
        requirement = line.split(" #", 1)[0].strip()
        if not requirement or requirement.startswith("#"):
            continue
        # NeMo Gym drops every line pointing into its own tree the same way (`grep -v -F '../..'`).
        if _NEMO_GYM_REQUIREMENT.match(requirement) or "../.." in requirement:
            continue
        added.append(requirement)
    return added


def server_python(installation: NemoGymInstallation, folder: Path, cache: Path) -> Path:
    own = folder / ".venv" / "bin" / "python"
    if own.exists():
        return own
    added = server_requirements(folder)
    if not added:
        return installation.python
    return _built_venv(installation, folder, added, cache) / "bin" / "python"


def server_requirements(folder: Path) -> list[str]:
    """What the server in ``folder`` needs besides nemo-gym, from the file NeMo Gym would read."""
    requirements, project = folder / "requirements.txt", folder / "pyproject.toml"
    if requirements.is_file():
        return added_requirements(requirements.read_text())
    if not project.is_file():
        return []
    try:
        dependencies = tomllib.loads(project.read_text()).get("project", {}).get("dependencies", [])
    except tomllib.TOMLDecodeError as exc:
        raise ServerError(f"{project} is not valid TOML: {exc}", path=project) from exc
    if not isinstance(dependencies, list) or not all(isinstance(line, str) for line in dependencies):
        raise ServerError(f"{project}: [project].dependencies is not a list of requirement strings", path=project)
    return added_requirements("\n".join(dependencies))


def venv_cache_folder(name: str, installation: NemoGymInstallation, added: list[str], cache: Path) -> Path:
    # The NeMo Gym Python as named (a venv's python resolves to the base interpreter, which two NeMo Gym venvs
    # share) and the site-packages its .pth file will point to.
    places = [str(installation.python), *map(str, installation.probe.site_packages)]
    key = "\n".join([*places, installation.probe.version, *added])
    return cache / "server-venvs" / f"{name}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


def _built_venv(installation: NemoGymInstallation, folder: Path, added: list[str], cache: Path) -> Path:
    venv = venv_cache_folder(folder.name, installation, added, cache)
    if (venv / READY_MARKER).exists():
        return venv
    venv.parent.mkdir(parents=True, exist_ok=True)
    with _locked(venv.with_name(venv.name + ".lock")):
        if (venv / READY_MARKER).exists():  # another run built it while we waited
            return venv
        log.warning(
            "reverify: building a Python for NeMo Gym's %s server in %s (once, then cached): %s",
            folder.name,
            venv,
            ", ".join(added),
        )
        shutil.rmtree(venv, ignore_errors=True)
        _build(installation, folder, added, venv)
        (venv / READY_MARKER).touch()
    return venv


def _build(installation: NemoGymInstallation, folder: Path, added: list[str], venv: Path) -> None:
    build_log = venv.with_name(venv.name + ".build.log")
    with build_log.open("wb") as out:
        _step([str(installation.python), "-m", "venv", "--without-pip", str(venv)], out, folder, build_log)
        site_packages = venv / "lib" / f"python{installation.probe.version}" / "site-packages"
        # An `import` line of a .pth file runs at start-up: addsitedir also reads the base's own .pth files
        # (an editable nemo-gym is one), which a plain path line would not.
        bases = ", ".join(repr(str(path)) for path in installation.probe.site_packages)
        (site_packages / "_reverify_nemo_gym_base.pth").write_text(
            f"import site; [site.addsitedir(path) for path in ({bases},)]\n"
        )
        requirements = venv / "requirements.txt"
        requirements.write_text("".join(f"{line}\n" for line in added))
        # The base's pip installs into the new venv; what the base already has satisfies the requirements.
        pip = [str(installation.python), "-m", "pip", "--python", str(venv / "bin" / "python"), "install"]
        _step([*pip, "--disable-pip-version-check", "-r", str(requirements)], out, folder, build_log)


def _step(command: list[str], out: IO[bytes], folder: Path, build_log: Path) -> None:
    done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, cwd=folder, check=False)
    if done.returncode != 0:
        tail = build_log.read_text(errors="replace")[-3000:].strip()
        raise ServerError(
            f"cannot build a Python for NeMo Gym's {folder.name} server from its requirements: "
            f"`{' '.join(command)}` exited {done.returncode}; the last lines of {build_log}:\n{tail}",
            path=build_log,
        )


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("a") as fp:
        fcntl.flock(fp, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fp, fcntl.LOCK_UN)


def default_cache() -> Path:
    """Where built venvs are kept: ``$REVERIFY_CACHE_DIR``, else the user's cache folder."""
    configured = os.environ.get(CACHE_ENV)
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "reverify-assets"
