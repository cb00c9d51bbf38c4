"""Whether NeMo Gym can be run on this machine for a side-by-side comparison, and why not."""

from __future__ import annotations

import glob
import shutil
import subprocess
import sys
from pathlib import Path

__all__ = ["nemo_gym_status"]


def nemo_gym_status() -> str:
    """Why the NeMo Gym comparison cannot run here. There is no `--vs-nemo-gym` mode: `gym eval reverify`
    first shipped after NeMo Gym 0.4.0, the newest release on PyPI (seen 2026-11-30; 0.4.0 has no
    rollout_reverification module), so no mode could be written against the real command and tried."""
    here = ".".join(map(str, sys.version_info[:3]))
    gym = shutil.which("gym")
    candidates = {shutil.which(f"python3.{minor}") for minor in range(13, 20)}
    # pyenv's shims fail for versions that are installed but not selected: ask the interpreters directly.
    candidates |= set(glob.glob(str(Path.home() / ".pyenv" / "versions" / "3.1[3-9]*" / "bin" / "python3")))
    interpreters = sorted(path for path in candidates if path and "/shims/" not in path)
    with_gym = []
    for python in interpreters:
        try:
            probe = subprocess.run([python, "-c", "import nemo_gym"], capture_output=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if probe.returncode == 0:
            with_gym.append(python)
    if with_gym or gym:
        found = ", ".join(filter(None, [gym and f"`gym` at {gym}", *with_gym]))
        return f"NeMo Gym comparison skipped: NeMo Gym found ({found}), but this harness has no comparison mode yet"
    pythons = ", ".join(interpreters) if interpreters else "none"
    return (
        f"NeMo Gym comparison skipped: NeMo Gym is not installed (it needs Python >= 3.13; this venv runs {here}; "
        f"no `gym` command on PATH; `import nemo_gym` fails in every Python >= 3.13 found: {pythons}). "
        "PyPI's newest nemo-gym, 0.4.0, has no `gym eval reverify` to compare with."
    )
