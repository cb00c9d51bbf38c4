"""Peak resident memory and CPU time of a whole process tree, sampled from /proc in a background thread.

A benchmark helper (Linux only): ``with TreeSampler(pid) as sampler: ...`` then ``sampler.report()``.
Every ``interval_s`` it walks the tree below ``pid`` through ``/proc/<pid>/task/<tid>/children`` (every
thread's, since any thread may have started a child) and reads ``VmRSS`` from each ``/proc/<pid>/status``.
Between two walks it reads only the ``VmRSS`` of the processes the last walk counted, every ``rss_interval_s``:
a walk reads tens of files (the CLI has a dozen threads), these few, so brief peaks (the join of a million
rows lasts about 50 ms) are caught without taking much of a core from the run.
It keeps each process's peak, the peak of the per-sample sum (processes alive at the same moment; with and
without the root), and each process's CPU time (utime + stime) as last seen.

VmRSS counts shared pages (the interpreter, shared libraries) in every process that maps them, so the sum
slightly overstates what the tree costs the machine; it is what ``ps`` and NeMo Gym's own figures report.
A process that lives less than one interval can be missed: the servers and the CLI live for seconds. A
child seen between fork and exec (still showing its parent's command line, for under half a second) is
not counted: it maps its parent's pages and would add a phantom copy of the parent to the sum.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

__all__ = [
    "ProcessPeak",
    "TreeReport",
    "TreeSampler",
    "cpu_seconds",
    "format_mb",
    "machine_busy_seconds",
    "machine_cpu_seconds",
    "tree_cpu_seconds",
    "wait_until_quiet",
]

_PROC = Path("/proc")
# utime and stime are fields 14 and 15 of /proc/<pid>/stat, in clock ticks.
_TICKS_PER_S = os.sysconf("SC_CLK_TCK")
# How long a child whose command line is still its parent's is taken for one between fork and exec.
PRE_EXEC_GRACE_S = 0.5


@dataclass
class ProcessPeak:
    pid: int
    command: str  # the command line as started, for telling the CLI from the servers
    first_seen: float  # time.perf_counter() of the first sample that saw it
    last_seen: float
    peak_rss_kb: int = 0
    peak_at: float = 0.0
    cpu_s: float = 0.0
    # Every sample (time, VmRSS kB): ~20 a second, a few hundred kB for a long run; says *when* memory grew.
    series: list[tuple[float, int]] = field(default_factory=list)

    @property
    def peak_rss_mb(self) -> float:
        return self.peak_rss_kb / 1024

    def rss_at(self, moment: float) -> int | None:
        """VmRSS (kB) at the last sample taken at or before ``moment``; None before the first."""
        found = None
        for at, kb in self.series:
            if at > moment:
                break
            found = kb
        return found


@dataclass
class TreeReport:
    root_pid: int
    processes: list[ProcessPeak] = field(default_factory=list)  # in order of first appearance
    peak_total_kb: int = 0
    peak_total_at: float = 0.0
    peak_descendants_kb: int = 0  # the peak of the per-sample sum without the root
    # Per named group of processes (say, the servers), the peak of the per-sample sum of its members.
    peak_group_kb: dict[str, int] = field(default_factory=dict)
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


def _tree(root: int) -> list[tuple[int, int | None]]:
    """(pid, parent pid) of every process under ``root``, each parent before its children."""
    found: list[tuple[int, int | None]] = []
    todo: list[tuple[int, int | None]] = [(root, None)]
    while todo:
        pid, parent = todo.pop()
        found.append((pid, parent))
        todo.extend((child, pid) for child in _children(pid))
    return found


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
    return sum(cpu for pid, _ in _tree(root) if (cpu := cpu_seconds(pid)) is not None)


def machine_cpu_seconds() -> tuple[float, float]:
    """(busy, steal): CPU time all cores have spent not idle since boot, and the part of it the hypervisor
    gave to other virtual machines (/proc/stat). Differences over a run spot someone else's load."""
    text = _read(_PROC / "stat") or ""
    first = text.splitlines()[0].split() if text else []
    if not first or first[0] != "cpu":
        return 0.0, 0.0
    # user nice system idle iowait irq softirq steal ...: all but idle and iowait are busy.
    ticks = [int(value) for value in first[1:9]]
    return (sum(ticks) - ticks[3] - ticks[4]) / _TICKS_PER_S, ticks[7] / _TICKS_PER_S


def machine_busy_seconds() -> float:
    return machine_cpu_seconds()[0]


def wait_until_quiet(max_wait_s: float = 60.0, probe_s: float = 1.0, busy_cores: float = 0.3) -> float:
    """Wait until the machine's busy CPU over ``probe_s`` falls under ``busy_cores``; the seconds it took.

    The benchmark lock keeps other benchmarks out, not test suites or builds started by hand; a figure
    taken while one of those runs measures half a machine. Prints what it waited for, and gives up (with a
    warning) after ``max_wait_s`` rather than hang.
    """
    started = time.perf_counter()
    while True:
        before = machine_busy_seconds()
        time.sleep(probe_s)
        busy = (machine_busy_seconds() - before) / probe_s
        waited = time.perf_counter() - started
        if busy < busy_cores:
            if waited > 1.5 * probe_s:
                print(f"  waited {waited:.0f} s for the machine to go quiet", flush=True)
            return waited
        if waited >= max_wait_s:
            print(f"  WARNING: the machine is still busy ({busy:.2f} cores) after {waited:.0f} s: measuring anyway")
            return waited
        if waited < 1.5 * probe_s:
            print(f"  another load is using {busy:.2f} cores: waiting up to {max_wait_s:.0f} s for quiet", flush=True)


def _command(pid: int) -> str:
    raw = _read(_PROC / str(pid) / "cmdline")
    return " ".join(raw.split("\0")).strip() if raw else "?"


class TreeSampler:
    """Samples the tree under ``root_pid`` every ``interval_s`` until ``stop()`` (or the ``with`` block ends)."""

    def __init__(
        self,
        root_pid: int,
        interval_s: float = 0.05,
        groups: Mapping[str, Callable[[str], bool]] | None = None,
        rss_interval_s: float = 0.01,
    ) -> None:
        """``groups`` name predicates on a process's command line; each gets its own peak of the sum."""
        self.interval_s = interval_s
        self.rss_interval_s = min(rss_interval_s, interval_s)
        self._counted: list[ProcessPeak] = []  # the processes the last walk counted, for the samples between walks
        self.groups = dict(groups or {})
        self._report = TreeReport(root_pid, peak_group_kb=dict.fromkeys(self.groups, 0))
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
        measured: list[tuple[ProcessPeak, int]] = []
        for pid, parent in _tree(self._report.root_pid):
            rss = _rss_kb(pid)
            if rss is None:
                continue
            cpu = cpu_seconds(pid)
            with self._lock:
                peak = self._by_pid.get(pid)
                if peak is None:
                    peak = self._by_pid[pid] = ProcessPeak(pid, _command(pid), now, now)
                    self._report.processes.append(peak)
                elif (command := _command(pid)) != "?":
                    # Re-read: a child caught between fork and exec showed its parent's command line.
                    peak.command = command
                parent_peak = self._by_pid.get(parent) if parent is not None else None
                if (
                    parent_peak is not None
                    and peak.command == parent_peak.command
                    and now - peak.first_seen < PRE_EXEC_GRACE_S
                ):
                    # A child just forked and not yet exec'd maps its parent's pages (copy-on-write): counting
                    # them would add a phantom copy of the parent. A real fork worker is counted from then on.
                    continue
                peak.series.append((now, rss))
                if cpu is not None:
                    peak.cpu_s = cpu
            measured.append((peak, rss))
        self._counted = [peak for peak, _ in measured]
        self._record(now, measured)

    def sample_rss(self) -> None:
        """The RSS of the processes the last walk counted, and its sums: a few files read, no walk."""
        now = time.perf_counter()
        measured = [(peak, rss) for peak in self._counted if (rss := _rss_kb(peak.pid)) is not None]
        self._record(now, measured)

    def _record(self, now: float, measured: list[tuple[ProcessPeak, int]]) -> None:
        """Each process's peak and the peaks of the sums, from one sample of the processes counted."""
        total = sum(rss for _, rss in measured)
        descendants = sum(rss for peak, rss in measured if peak.pid != self._report.root_pid)
        in_group = {
            name: sum(rss for peak, rss in measured if member(peak.command)) for name, member in self.groups.items()
        }
        with self._lock:
            for peak, rss in measured:
                peak.last_seen = now
                if rss > peak.peak_rss_kb:
                    peak.peak_rss_kb, peak.peak_at = rss, now
            self._report.samples += 1
            self._report.peak_descendants_kb = max(self._report.peak_descendants_kb, descendants)
            for name, kb in in_group.items():
                self._report.peak_group_kb[name] = max(self._report.peak_group_kb[name], kb)
            if total > self._report.peak_total_kb:
                self._report.peak_total_kb = total
                self._report.peak_total_at = now

    def _run(self) -> None:
        # A fixed schedule rather than sleep(interval) after each sample, so slow samples do not stretch it.
        next_at = next_walk = time.perf_counter()
        while not self._stop.is_set():
            if time.perf_counter() >= next_walk:
                self.sample_once()
                next_walk += self.interval_s
            else:
                self.sample_rss()
            next_at += self.rss_interval_s
            self._stop.wait(max(0.0, next_at - time.perf_counter()))
