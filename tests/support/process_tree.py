"""A process's descendants read from /proc (Linux), for tests that signal a process and check what it leaves.

Children in sessions of their own are still descendants: a new session changes the process group, not the parent.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PROC = Path("/proc")


@dataclass(frozen=True)
class ProcessInfo:
    pid: int
    parent: int
    command: str  # its argv, joined by spaces

    def alive(self) -> bool:
        """Still running (a zombie no longer counts) and still this process, not a new one under its pid."""
        now = _read(self.pid)
        return now is not None and now.command == self.command and _state(self.pid) not in ("Z", "X", None)


def _stat_fields(pid: int) -> list[str] | None:
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # The command name in parentheses may itself hold spaces and parentheses: split after the last one.
    return stat[stat.rindex(")") + 2 :].split()


def _state(pid: int) -> str | None:
    fields = _stat_fields(pid)
    return None if fields is None else fields[0]


def _read(pid: int) -> ProcessInfo | None:
    fields = _stat_fields(pid)
    try:
        argv = (PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return None
    if fields is None:
        return None
    return ProcessInfo(pid, int(fields[1]), argv.replace(b"\0", b" ").decode(errors="replace").strip())


def all_processes() -> list[ProcessInfo]:
    found = (_read(int(entry.name)) for entry in PROC.iterdir() if entry.name.isdigit())
    return [info for info in found if info is not None]


def descendants(pid: int) -> list[ProcessInfo]:
    """Every living process below ``pid``, children first."""
    by_parent: dict[int, list[ProcessInfo]] = {}
    for info in all_processes():
        by_parent.setdefault(info.parent, []).append(info)
    found: list[ProcessInfo] = []
    parents = [pid]
    while parents:
        children = [child for parent in parents for child in by_parent.get(parent, [])]
        found += children
        parents = [child.pid for child in children]
    return found


def wait_until(condition: Callable[[], object], timeout: float, poll_s: float = 0.02) -> bool:
    """Poll ``condition`` until it holds (True) or ``timeout`` seconds pass (False)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(poll_s)
    return bool(condition())


def survivors(processes: Iterable[ProcessInfo], within: float) -> list[ProcessInfo]:
    """Those of ``processes`` still alive ``within`` seconds from now (returns as soon as none is)."""
    processes = list(processes)
    wait_until(lambda: not any(p.alive() for p in processes), within)
    return [p for p in processes if p.alive()]


def kill_all(processes: Iterable[ProcessInfo]) -> None:
    """SIGKILL whatever of ``processes`` is left: a test's clean-up, so that a failure leaves nothing running."""
    for process in processes:
        if process.alive():
            try:
                os.kill(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def run_reaped(command: list[str], *, timeout: float, **popen: Any) -> subprocess.CompletedProcess[str]:
    """``subprocess.run`` with text output captured, except that a command still running at ``timeout`` is killed
    with every process it started (``subprocess.run`` kills the command alone: a killed ``reverify backfill``
    left its workers running for 35 minutes)."""
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen) as process:
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            tree = descendants(process.pid)
            process.kill()
            kill_all(tree)
            process.communicate()
            raise
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)
