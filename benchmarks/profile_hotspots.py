"""Where a command's CPU time goes, per process: a `py-spy record --subprocesses` run, summarised.

`record` runs a command under py-spy (100 samples/s, idle stacks left out, every Python child process
followed, raw "collapsed stack" output); `summarise` reads that file and prints, for each process with
enough samples, the functions with the most samples including their callees (project frames only, so the
table reads as the pipeline's own structure) and the leaf frames with the most samples (where the
interpreter actually was, library code included). py-spy slows the profiled processes a little: never
take timings from a profiled run.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["py_spy_executable", "record", "summarise"]

RATE_HZ = 100
_PROCESS_FRAME = re.compile(r'process (\d+):"(.*)"')
_LINE_NUMBER = re.compile(r":\d+\)$")
_SITE_PACKAGES = re.compile(r"\S*/site-packages/")
PROJECT_MARK = "reverify_assets/"


def py_spy_executable() -> str | None:
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.is_file() else shutil.which("py-spy")


def record(py_spy: str, command: Sequence[str], output: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run ``command`` under py-spy; its collapsed stacks go to ``output``."""
    wrapped = [
        py_spy, "record", "--subprocesses", "--rate", str(RATE_HZ), "--format", "raw", "-o", str(output),
        "--", *command,
    ]  # fmt: skip
    return subprocess.run(wrapped, capture_output=True, text=True, env=env)


def _frame_name(frame: str) -> str:
    # "fn (path/to/file.py:123)" → "fn (file path without site-packages)": one name per function, not per line.
    return _SITE_PACKAGES.sub("", _LINE_NUMBER.sub(")", frame))


@dataclass
class _Process:
    pid: str
    command: str
    samples: int = 0
    inclusive: Counter[str] = field(default_factory=Counter)
    leaves: Counter[str] = field(default_factory=Counter)


def _read(raw: Path) -> dict[str, _Process]:
    processes: dict[str, _Process] = {}
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        # With --subprocesses a child's stack is prefixed by its ancestors' "process" frames: the last one names it.
        owners = [found for frame in frames if (found := _PROCESS_FRAME.fullmatch(frame))]
        code = [_frame_name(frame) for frame in frames if not _PROCESS_FRAME.fullmatch(frame)]
        if not owners or not code:
            continue
        pid, command = owners[-1].group(1), owners[-1].group(2)
        process = processes.setdefault(pid, _Process(pid, command))
        samples = int(count)
        process.samples += samples
        process.leaves[code[-1]] += samples
        for name in dict.fromkeys(frame for frame in code if PROJECT_MARK in frame):  # each function once a stack
            process.inclusive[name] += samples
    return processes


def summarise(raw: Path, top: int = 12, min_samples: int = 50) -> str:
    lines: list[str] = []
    for process in sorted(_read(raw).values(), key=lambda p: -p.samples):
        if process.samples < min_samples:
            continue
        command = process.command or "the profiled command"
        lines.append(
            f"\nprocess {process.pid} ({command[-70:]}): {process.samples} samples ≈ "
            f"{process.samples / RATE_HZ:.1f} s of CPU"
        )
        lines.append("  most samples, callees included (project functions):")
        for name, samples in process.inclusive.most_common(top):
            lines.append(f"    {100 * samples / process.samples:5.1f} %  {name}")
        lines.append("  most samples as the running frame (self time):")
        for name, samples in process.leaves.most_common(top):
            lines.append(f"    {100 * samples / process.samples:5.1f} %  {name}")
    return "\n".join(lines)


if __name__ == "__main__":
    # Summarise an existing profile: python benchmarks/profile_hotspots.py RAW_FILE [TOP]
    print(summarise(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 12))
