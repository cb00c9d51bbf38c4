"""Peak resident memory and CPU time of a whole process tree, sampled from /proc in a background thread.

A benchmark helper (Linux only): ``with TreeSampler(pid) as sampler: ...`` then ``sampler.report()``.
Every ``interval_s`` it walks the tree below ``pid`` through ``/proc/<pid>/task/<tid>/children`` (every
thread's, since any thread may have started a child) and reads ``VmRSS`` from each ``/proc/<pid>/status``.
It keeps each process's peak, the peak of the per-sample sum (processes alive at the same moment; with and
without the root), and each process's CPU time (utime + stime) as last seen.

VmRSS counts shared pages (the interpreter, shared libraries) in every process that maps them, so the sum
slightly overstates what the tree costs the machine; it is what ``ps`` and NeMo Gym's own figures report.
A process that lives less than one interval can be missed: the servers and the CLI live for seconds.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

__all__ = ["ProcessPeak", "TreeReport", "TreeSampler", "cpu_seconds", "format_mb", "tree_cpu_seconds"]

_PROC = Path("/proc")
# utime and stime are fields 14 and 15 of /proc/<pid>/stat, in clock ticks.
_TICKS_PER_S = os.sysconf("SC_CLK_TCK")


@dataclass
class ProcessPeak:
    pid: int
    command: str  # the command line as started, for telling the CLI from the servers
    first_seen: float  # time.perf_counter() of the first sample that saw it
    last_seen: float
    peak_rss_kb: int = 0
    cpu_s: float = 0.0

    @property
    def peak_rss_mb(self) -> float:
        return self.peak_rss_kb / 1024


@dataclass
class TreeReport:
    root_pid: int
    processes: list[ProcessPeak] = field(default_factory=list)  # in order of first appearance
    peak_total_kb: int = 0
    peak_total_at: float = 0.0
    peak_descendants_kb: int = 0  # the peak of the per-sample sum without the root: all servers at once
    samples: int = 0

    @property
    def peak_total_mb(self) -> float:
        return self.peak_total_kb / 1024

    @property
    def root(self) -> ProcessPeak | None:
        return next((p for p in self.processes if p.pid == self.root_pid), None)

    def descendants(self) -> list[ProcessPeak]:
        return [p for p in self.processes if p.pid != self.root_pid]


def format_mb(kb: int) -> str:
    return f"{kb / 1024:,.0f} MB"


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None  # the process ended between listing and reading: normal at the end of a run


def _children(pid: int) -> list[int]:
    try:
        tids = os.listdir(_PROC / str(pid) / "task")
    except (FileNotFoundError, ProcessLookupError):
        return []
    found: list[int] = []
    for tid in tids:
        text = _read(_PROC / str(pid) / "task" / tid / "children")
        if text:
            found.extend(int(child) for child in text.split())
    return found


def _tree(root: int) -> list[int]:
    pids, todo = [], [root]
    while todo:
        pid = todo.pop()
        pids.append(pid)
        todo.extend(_children(pid))
    return pids


def _rss_kb(pid: int) -> int | None:
    status = _read(_PROC / str(pid) / "status")
    if status is None:
        return None
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return None  # a zombie has no VmRSS line: it holds no memory any more


def cpu_seconds(pid: int) -> float | None:
    """CPU time (user + system) the process has used so far; None once it is gone."""
    stat = _read(_PROC / str(pid) / "stat")
    if stat is None:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its closing parenthesis.
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS_PER_S


def tree_cpu_seconds(root: int) -> float:
    """CPU time used so far by the live processes of the tree under ``root``."""
    return sum(cpu for pid in _tree(root) if (cpu := cpu_seconds(pid)) is not None)


def _command(pid: int) -> str:
    raw = _read(_PROC / str(pid) / "cmdline")
    return " ".join(raw.split("\0")).strip() if raw else "?"


class TreeSampler:
    """Samples the tree under ``root_pid`` every ``interval_s`` until ``stop()`` (or the ``with`` block ends)."""

    def __init__(self, root_pid: int, interval_s: float = 0.05) -> None:
        self.interval_s = interval_s
        self._report = TreeReport(root_pid)
        self._by_pid: dict[int, ProcessPeak] = {}
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=f"tree-sampler-{root_pid}", daemon=True)

    def __enter__(self) -> TreeSampler:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> TreeReport:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        return self.report()

    def report(self) -> TreeReport:
        with self._lock:
            return self._report

    def sample_once(self) -> None:
        now = time.perf_counter()
        total = descendants = 0
        for pid in _tree(self._report.root_pid):
            rss = _rss_kb(pid)
            if rss is None:
                continue
            cpu = cpu_seconds(pid)
            with self._lock:
                peak = self._by_pid.get(pid)
                if peak is None:
                    peak = self._by_pid[pid] = ProcessPeak(pid, _command(pid), now, now)
                    self._report.processes.append(peak)
                peak.last_seen = now
                peak.peak_rss_kb = max(peak.peak_rss_kb, rss)
                if cpu is not None:
                    peak.cpu_s = cpu
            total += rss
            if pid != self._report.root_pid:
                descendants += rss
        with self._lock:
            self._report.samples += 1
            self._report.peak_descendants_kb = max(self._report.peak_descendants_kb, descendants)
            if total > self._report.peak_total_kb:
                self._report.peak_total_kb = total
                self._report.peak_total_at = now

    def _run(self) -> None:
        # A fixed schedule rather than sleep(interval) after each sample, so slow samples do not stretch it.
        next_at = time.perf_counter()
        while not self._stop.is_set():
            self.sample_once()
            next_at += self.interval_s
            self._stop.wait(max(0.0, next_at - time.perf_counter()))
