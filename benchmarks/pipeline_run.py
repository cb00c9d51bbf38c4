"""One timed `reverify run` and its report: the phases (from the output's growth), Dagster's own step windows,
and every process's peak memory and CPU time."""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench_data import Dataset, count_lines
from dagster_steps import RunWindows, read_run_windows
from output_watch import OutputWatcher
from process_memory import ProcessPeak, TreeReport, TreeSampler, cpu_seconds, format_mb, machine_cpu_seconds

__all__ = [
    "GRADING_MODE_KEY",
    "MCQA_CONFIG",
    "PipelineRun",
    "fmt_s",
    "print_cpu",
    "print_pipeline",
    "run_command_line",
    "run_pipeline",
    "seconds",
]

REPO = Path(__file__).resolve().parents[1]
MCQA_CONFIG = REPO / "configs" / "mcqa.yaml"
GRADING_MODE_KEY = "mcqa.resources_servers.mcqa.grading_mode"
SERVER_MODULE_MARK = "reverify_assets.servers"  # in the command line of every built-in server process
# A NeMo Gym server runs `<its python> app.py` under our `reverify_assets.verifier.process_guard`.
GYM_SERVER_MARKS = (" app.py", "reverify_assets.verifier.process_guard")
OUTPUT_ROWS = re.compile(r"^Output:\s+\S.* \((\d+) rows\)", re.MULTILINE)
FAILURE_ROWS = re.compile(r"^Failures:\s+\S.* \((\d+) written this run\)", re.MULTILINE)
MEAN_REWARD = re.compile(r"^Mean reward: (\S+)", re.MULTILINE)


def seconds(start: float | None, end: float | None) -> float | None:
    return None if start is None or end is None else end - start


def fmt_s(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f} s"


@dataclass
class PipelineRun:
    rows: int  # rows the run verified: output + failures sidecar
    mean_reward: str
    started: float
    ended: float
    output_created: float | None  # the verify step opened its output: servers up, guard passed
    first_row: float | None
    last_row: float | None
    sorted_at: float | None  # the sorted copy replaced the output
    memory: TreeReport
    cli_cpu_s: float  # read from the exited, not yet reaped CLI: exact, and without its children's
    machine_busy_s: float  # CPU time all cores spent busy during the run, whoever used it
    machine_steal_s: float  # the part of it the hypervisor gave to other virtual machines
    started_unix: float  # time.time() at `started`: Dagster's event timestamps are unix times
    dagster: RunWindows | None  # the run's step windows, from its instance
    output: Path
    metrics: Path

    @property
    def wall_s(self) -> float:
        return self.ended - self.started

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.wall_s

    @property
    def verify_s(self) -> float | None:
        return seconds(self.first_row, self.last_row)

    @property
    def verify_rows_per_s(self) -> float | None:
        return self.rows / self.verify_s if self.verify_s else None

    @property
    def tree_cpu_s(self) -> float:
        return self.cli_cpu_s + sum(p.cpu_s for p in self.memory.descendants())

    def servers(self) -> list[ProcessPeak]:
        return [p for p in self.memory.descendants() if is_server(p.command)]

    @property
    def servers_peak_kb(self) -> int:
        return self.memory.peak_group_kb.get("servers", 0)

    def role(self, process: ProcessPeak) -> str:
        if process.pid == self.memory.root_pid:
            return "CLI (reverify run)"
        if not is_server(process.command):
            return helper_role(process.command)
        # The verify step's servers start before the last answer; the metrics step starts its own after.
        if self.last_row is None or process.first_seen <= self.last_row:
            return "server (verify step)"
        return "server (aggregate step)"


def is_server(command: str) -> bool:
    return SERVER_MODULE_MARK in command or any(mark in command for mark in GYM_SERVER_MARKS)


def helper_role(command: str) -> str:
    # Dagster's compute-log capture tees each step's stdout and stderr through `tail -F`, each watched by a
    # Python process that kills it if the run dies (dagster/_core/execution/compute_logs.py).
    if command.startswith("tail -F"):
        return "Dagster compute-log `tail -F`"
    if "watch_orphans" in command:
        return "Dagster compute-log orphan watcher (python)"
    return f"other child: {command[:60]}"


def run_command_line(
    reverify: str,
    data: Dataset,
    output: Path,
    concurrency: int,
    grading_mode: str | None,
    extra: Sequence[str] = (),
    config: Path = MCQA_CONFIG,
) -> list[str]:
    """``grading_mode``: mcqa's (None: another server's config, without one)."""
    mode = [] if grading_mode is None else [f"++{GRADING_MODE_KEY}={grading_mode}"]
    return [
        reverify, "run", "--config", str(config),
        "--inputs", str(data.inputs), "--rollouts", str(data.rollouts), "--output", str(output),
        "--concurrency", str(concurrency), *mode, *extra,
    ]  # fmt: skip


def run_pipeline(
    reverify: str,
    data: Dataset,
    work: Path,
    concurrency: int,
    grading_mode: str | None,
    extra: Sequence[str] = (),
    env_extra: Mapping[str, str] | None = None,
    config: Path = MCQA_CONFIG,
) -> PipelineRun:
    """``extra``: more arguments of ``reverify run`` (with ``--force`` its files are named ``unsafe_*``);
    ``env_extra``: more environment variables for it."""
    run_dir = work / "run"
    dagster_home = run_dir / "dagster_home"
    dagster_home.mkdir(parents=True)  # fresh: no earlier runs' records to load or append to
    asked = run_dir / "out" / "reverified.jsonl"
    output = asked.with_name(f"unsafe_{asked.name}") if "--force" in extra else asked
    sidecar = output.with_name(f"{output.stem}_failures.jsonl")
    command = run_command_line(reverify, data, asked, concurrency, grading_mode, extra, config)
    env = {**os.environ, **(env_extra or {}), "DAGSTER_HOME": str(dagster_home)}
    stdout_path, stderr_path = run_dir / "stdout.txt", run_dir / "stderr.txt"
    print(f"$ DAGSTER_HOME={dagster_home} {' '.join(command)}", flush=True)
    with stdout_path.open("wb") as out, stderr_path.open("wb") as err, OutputWatcher([output, sidecar]) as watcher:
        busy_before, steal_before = machine_cpu_seconds()
        started, started_unix = time.perf_counter(), time.time()
        process = subprocess.Popen(command, stdout=out, stderr=err, env=env)
        try:
            with TreeSampler(process.pid, groups={"servers": is_server}) as sampler:
                # Wait for the exit without reaping: the zombie's /proc/<pid>/stat still holds the CLI's own
                # CPU time (wait4's rusage would add the children it reaped, the servers, to it).
                os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOWAIT)
                ended = time.perf_counter()
                cli_cpu_s = cpu_seconds(process.pid) or 0.0
            busy_after, steal_after = machine_cpu_seconds()
        finally:
            # Ctrl-C here must not leave the CLI running (it stops its own servers when it goes).
            if process.poll() is None:
                process.kill()
            process.wait()
    stdout = stdout_path.read_text()
    if process.returncode != 0:
        raise RuntimeError(
            f"`{' '.join(command)}` exited {process.returncode}:\n{stderr_path.read_text()[-4000:]}\n{stdout}"
        )
    output_rows = OUTPUT_ROWS.search(stdout)
    failure_rows = FAILURE_ROWS.search(stdout)
    rows = (
        int(output_rows.group(1)) + int(failure_rows.group(1))
        if output_rows and failure_rows
        else count_lines(output) + count_lines(sidecar)
    )
    mean = MEAN_REWARD.search(stdout)
    return PipelineRun(
        rows=rows,
        mean_reward=mean.group(1) if mean else "n/a",
        started=started,
        ended=ended,
        output_created=watcher.created_at,
        first_row=watcher.first_row_at,
        last_row=watcher.last_row_at,
        sorted_at=watcher.replaced_at,
        memory=sampler.report(),
        cli_cpu_s=cli_cpu_s,
        machine_busy_s=busy_after - busy_before,
        machine_steal_s=steal_after - steal_before,
        started_unix=started_unix,
        dagster=read_run_windows(dagster_home),
        output=output,
        metrics=output.with_name(f"{output.stem}_aggregate_metrics.json"),
    )


def print_pipeline(run: PipelineRun) -> None:
    t0 = run.started
    servers = run.servers()
    verify_server = next((p for p in servers if run.role(p) == "server (verify step)"), None)
    aggregate_server = next((p for p in servers if run.role(p) == "server (aggregate step)"), None)

    def at(moment: float | None) -> str:
        return "n/a" if moment is None else f"t+{moment - t0:.2f} s"

    print(f"\npipeline: {run.rows:,} rows in {run.wall_s:.2f} s = {run.rows_per_s:,.0f} rows/s end to end; "
          f"mean reward {run.mean_reward}")  # fmt: skip
    print("| phase | wall time | share | from → to |")
    print("|-------|-----------|-------|-----------|")
    phases = (
        ("start-up (command start → first /verify answered)", t0, run.first_row),
        ("verify (first → last /verify answered)", run.first_row, run.last_row),
        ("aggregate (last answer → command end)", run.last_row, run.ended),
        ("total", t0, run.ended),
    )
    for name, start, end in phases:
        length = seconds(start, end)
        share = "n/a" if length is None else f"{100 * length / run.wall_s:.0f} %"
        print(f"| {name} | {fmt_s(length)} | {share} | {at(start)} → {at(end)} |")
    if run.verify_rows_per_s:
        print(f"verify phase alone: {run.verify_rows_per_s:,.0f} rows/s")
    print("milestones (the sampler's 50 ms and the watcher's 10 ms resolution):")
    print(f"  verify-step server process first seen   {at(verify_server.first_seen if verify_server else None)}")
    print(f"  output file opened (servers up, guard ok) {at(run.output_created)}")
    print(f"  first row written                        {at(run.first_row)}")
    print(f"  last row written                         {at(run.last_row)}")
    print(f"  verify-step server last seen             {at(verify_server.last_seen if verify_server else None)}")
    # No new file means sort_by_key found the rows already in key order (they settle in dispatch order).
    sorted_note = at(run.sorted_at) if run.sorted_at is not None else "none (already in key order: not rewritten)"
    print(f"  sorted output moved into place           {sorted_note}")
    print(f"  aggregate-step server first → last seen  "
          f"{at(aggregate_server.first_seen if aggregate_server else None)} → "
          f"{at(aggregate_server.last_seen if aggregate_server else None)}")  # fmt: skip
    print(f"  command ended                            {at(run.ended)}")
    if run.dagster is not None:
        print_dagster_steps(run)
    print("\n| process | pid | peak RSS | CPU time | alive (seen) |")
    print("|---------|-----|----------|----------|--------------|")
    for process in run.memory.processes:
        cpu = run.cli_cpu_s if process.pid == run.memory.root_pid else process.cpu_s
        print(
            f"| {run.role(process)} | {process.pid} | {format_mb(process.peak_rss_kb)} | {cpu:.1f} s | "
            f"{at(process.first_seen)} → {at(process.last_seen)} |"
        )
    print(f"| all servers at once (peak of the sum) | | {format_mb(run.servers_peak_kb)} | | |")
    print(f"| all children at once (peak of the sum) | | {format_mb(run.memory.peak_descendants_kb)} | | |")
    print(
        f"| whole tree (peak of the sum) | | {format_mb(run.memory.peak_total_kb)} | | "
        f"at {at(run.memory.peak_total_at)} ({run.memory.samples} samples) |"
    )
    root = run.memory.root
    if root is not None:
        # When the CLI's memory grows tells which step holds it (rows are meant to stream).
        moments = (("first row", run.first_row), ("last row", run.last_row), ("command end", run.ended))
        levels = ", ".join(
            f"{format_mb(kb)} at {name}" for name, moment in moments if moment and (kb := root.rss_at(moment))
        )
        print(f"CLI RSS: {levels}; peak {format_mb(root.peak_rss_kb)} at {at(root.peak_at)}")
    print_cpu(run.wall_s, run.tree_cpu_s, run.machine_busy_s, run.machine_steal_s, "this run's processes")


def print_dagster_steps(run: PipelineRun) -> None:
    windows = run.dagster
    if windows is None:
        return

    def at(unix: float | None) -> str:
        return "n/a" if unix is None else f"t+{unix - run.started_unix:.2f} s"

    print("Dagster's own record of the run (event timestamps):")
    print(f"  run started                              {at(windows.run_start)}")
    for step, (start, end) in windows.steps.items():
        print(f"  step {step:<35} {at(start)} → {at(end)} ({end - start:.2f} s)")
    print(f"  run ended                                {at(windows.run_end)}")


def print_cpu(wall_s: float, ours_s: float, busy_s: float, steal_s: float, ours: str) -> None:
    """Our CPU time next to the machine's: a large remainder means another load skewed the figures."""
    cores = os.cpu_count() or 1
    other = max(0.0, busy_s - ours_s)
    print(
        f"CPU: {ours} {ours_s:.1f} core-s; machine busy {busy_s:.1f} of {cores * wall_s:.1f} core-s available; "
        f"other load ≈ {other:.1f} core-s (hypervisor steal {steal_s:.1f})"
        f"{' — FIGURES MAY BE SKEWED' if other > 0.1 * cores * wall_s else ''}"
    )
