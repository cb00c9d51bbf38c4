"""Whether NeMo Gym is installed on this machine for `run_benchmark.py --vs-nemo-gym`, and if not, why."""

from __future__ import annotations

import glob
import shutil
import subprocess
import sys
from pathlib import Path

__all__ = ["nemo_gym_status"]


def nemo_gym_status() -> str:
    """Where NeMo Gym was found, or why the comparison was not run. PyPI's nemo-gym 0.5.0-0.7.0 have
    `gym eval reverify` and require Python >= 3.13.14 (seen 2026-11-30); benchmarks/README.md says how 0.7.0
    was installed on this machine's Python 3.13.0."""
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
        return f"NeMo Gym comparison not asked for: NeMo Gym found ({found}); compare with --vs-nemo-gym GYM"
    pythons = ", ".join(interpreters) if interpreters else "none"
    return (
        f"NeMo Gym comparison skipped: NeMo Gym is not installed (it needs Python >= 3.13; this venv runs {here}; "
        f"no `gym` command on PATH; `import nemo_gym` fails in every Python >= 3.13 found: {pythons}). "
        "benchmarks/README.md says how to install it, then give its `gym` to --vs-nemo-gym."
    )
