"""Judge-failure recovery, end to end with the real CLI: does recovering a judge outage give the clean run's scores?

Generates a synthetic free-form QA run (`reverify_assets.synthetic.qa_rollouts`), starts the local judge model
(`reverify judge-serve --port 0`) and runs `reverify run` with `configs/judge.yaml` against it four times:

a. clean: the judge healthy, every row judged (mean reward A);
b. outage: the same data while `POST /control` makes a share of judge requests fail with HTTP 503; those rows
   land in the failures sidecar as `judge_failed`;
c. recovery: the judge healthy again, `--judge-failed-only --rollouts <b's output> --output <merged>`, and the
   same with `--append` onto a copy of b's output (mean reward B of each merged file);
d. a table: rows, judge failures, rows re-verified (as the CLI, the sidecar and the judge count them),
   recovery wall time, A and B, and whether they are equal (exact float equality of the means and the rewards
   row for row by key), then the judge's request counts per phase.

A benchmark, not a test: it prints figures and asserts nothing about time. It fails (exit 1) only when a
command fails. Every command runs with a fresh DAGSTER_HOME inside the work directory.

    .venv/bin/python benchmarks/judge_recovery.py [--tasks 2500] [--rollouts-per-task 4] [--share 0.02]
        [--seed 11] [--keep DIR]
"""

from __future__ import annotations

import argparse
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from reverify_assets.synthetic.nemo_gym_rows import positive_int
from reverify_assets.synthetic.qa_rollouts import QASpec, write_qa_dataset

REPO = Path(__file__).resolve().parents[1]
JUDGE_CONFIG = REPO / "configs" / "judge.yaml"
JUDGE_BLOCK = "judge.resources_servers.equivalence_judge"
# Short backoff: a failing prompt fails on every attempt (the local judge hashes the request), so the
# default 2..30 s waits would only measure sleeping.
BACKOFF_OVERRIDES = (f"++{JUDGE_BLOCK}.retry_base_wait_s=0.05", f"++{JUDGE_BLOCK}.retry_max_wait_s=0.2")
LISTENING = re.compile(r"judge model listening on (http://\S+)")
RECOVERED = re.compile(r"Seeded (\d+) successes and recovered (\d+) of (\d+) re-judged rows")

Key = tuple[int, int]


def reverify_executable() -> str:
    """The `reverify` next to this interpreter (the project's venv), else the one on PATH."""
    beside = Path(sys.executable).parent / "reverify"
    found = str(beside) if beside.is_file() else shutil.which("reverify")
    if not found:
        raise SystemExit("error: no `reverify` command next to this Python or on PATH (install the project first)")
    return found


def child_env(dagster_home: Path) -> dict[str, str]:
    env = {**os.environ, "DAGSTER_HOME": str(dagster_home)}
    # configs/judge.yaml sends $JUDGE_API_KEY as a Bearer token: a real provider's key has no business going
    # to the local stand-in.
    env.pop("JUDGE_API_KEY", None)
    return env


@dataclass
class LocalJudge:
    """`reverify judge-serve --port 0` as a subprocess, switched between phases through POST /control."""

    process: subprocess.Popen[str]
    url: str
    log: Path

    @classmethod
    def start(cls, reverify: str, env: dict[str, str], log: Path) -> LocalJudge:
        with log.open("w") as err:
            process = subprocess.Popen(
                [reverify, "judge-serve", "--port", "0"], stdout=subprocess.PIPE, stderr=err, text=True, env=env
            )
        if process.stdout is None:  # only for the type checker: stdout=PIPE always gives one
            raise RuntimeError("reverify judge-serve: no stdout pipe")
        # Its first stdout line names the port it got; EOF instead means it failed to start.
        first = process.stdout.readline()
        found = LISTENING.search(first)
        if found is None:
            process.kill()
            process.wait()
            raise RuntimeError(f"reverify judge-serve did not start: {first!r} {log.read_text()}")
        return cls(process, found.group(1), log)

    def _call(self, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        data = None if body is None else orjson.dumps(body)
        request = urllib.request.Request(f"{self.url}{path}", data=data, method="GET" if body is None else "POST")
        with urllib.request.urlopen(request, timeout=10) as reply:
            return orjson.loads(reply.read())

    def control(self, *, fail_share: float, seed: int, latency_ms: int = 0) -> None:
        """Set the failing share and the delay of each reply, and start counting requests afresh (one phase per
        call)."""
        knobs = {"fail_status": 503, "fail_share": fail_share, "seed": seed, "latency_ms": latency_ms}
        self._call("/control", knobs | {"reset_stats": True})

    def stats(self) -> dict[str, Any]:
        return self._call("/stats")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@dataclass
class Phase:
    name: str
    output: Path
    wall_s: float
    stdout: str
    judge: dict[str, Any]
    rewards: dict[Key, float] = field(default_factory=dict)

    @property
    def sidecar(self) -> Path:
        return self.output.with_name(f"{self.output.stem}_failures.jsonl")

    @property
    def metrics_mean(self) -> float | None:
        path = self.output.with_name(f"{self.output.stem}_aggregate_metrics.json")
        if not path.is_file():
            return None
        entries = orjson.loads(path.read_bytes())
        # One entry is expected (one agent); more would mean recovery split the run label.
        return entries[0]["key_metrics"]["mean/reward"] if len(entries) == 1 else None


def read_rewards(path: Path) -> dict[Key, float]:
    rewards: dict[Key, float] = {}
    with path.open("rb") as fh:
        for line in fh:
            row = orjson.loads(line)
            rewards[(row["_ng_task_index"], row["_ng_rollout_index"])] = row["reward"]
    return rewards


def sidecar_counts(path: Path) -> tuple[int, int]:
    """(rows, distinct keys) of a failures sidecar."""
    keys: set[Key] = set()
    rows = 0
    with path.open("rb") as fh:
        for line in fh:
            row = orjson.loads(line)
            rows += 1
            keys.add((row["_ng_task_index"], row["_ng_rollout_index"]))
    return rows, len(keys)


def mean(rewards: dict[Key, float]) -> float:
    # In key order with fsum: the same rewards always give the same float, whatever order the file had.
    return math.fsum(rewards[key] for key in sorted(rewards)) / len(rewards) if rewards else math.nan


class Runner:
    def __init__(self, reverify: str, env: dict[str, str], inputs: Path, judge: LocalJudge) -> None:
        self.reverify = reverify
        self.env = env
        self.inputs = inputs
        self.judge = judge

    def run(self, name: str, rollouts: Path, output: Path, *flags: str) -> Phase:
        output.parent.mkdir(parents=True, exist_ok=True)
        command = [
            self.reverify,
            "run",
            "--config",
            str(JUDGE_CONFIG),
            "--inputs",
            str(self.inputs),
            "--rollouts",
            str(rollouts),
            "--output",
            str(output),
            *flags,
            f"++{JUDGE_BLOCK}.judge_base_url={self.judge.url}",
            *BACKOFF_OVERRIDES,
        ]
        started = time.perf_counter()
        result = subprocess.run(command, capture_output=True, text=True, env=self.env)
        wall_s = time.perf_counter() - started
        if result.returncode != 0:
            raise RuntimeError(f"{name}: `{' '.join(command)}` exited {result.returncode}:\n{result.stderr}")
        phase = Phase(name, output, wall_s, result.stdout, self.judge.stats())
        phase.rewards = read_rewards(output)
        return phase


def yes_no(value: bool) -> str:
    return "yes" if value else "no"


def print_report(
    args: argparse.Namespace,
    stored: dict[Key, float],
    clean: Phase,
    outage: Phase,
    recovered: Phase,
    appended: Phase,
) -> None:
    rows = args.tasks * args.rollouts_per_task
    sidecar_rows, sidecar_keys = sidecar_counts(outage.sidecar)
    cli = RECOVERED.search(recovered.stdout)
    cli_append = RECOVERED.search(appended.stdout)
    mean_a, mean_b, mean_b_append = mean(clean.rewards), mean(recovered.rewards), mean(appended.rewards)
    means_equal = mean_a == mean_b == mean_b_append
    rows_equal = clean.rewards == recovered.rewards == appended.rewards and len(clean.rewards) == rows
    cli_means = (clean.metrics_mean, recovered.metrics_mean, appended.metrics_mean)

    def cli_count(found: re.Match[str] | None) -> str:
        return f"{found.group(2)} of {found.group(3)} (seeded {found.group(1)})" if found else "not printed"

    table = [
        ("rows", f"{rows:,} ({args.tasks:,} tasks × {args.rollouts_per_task})"),
        ("judge failures", f"{sidecar_rows:,} sidecar rows, {sidecar_keys:,} keys ({outage.judge['failed']:,} 503s)"),
        ("rows left scored by the outage run", f"{len(outage.rewards):,}"),
        (
            "rows re-verified",
            f"{recovered.judge['answered']:,} judge answers; CLI: {cli_count(cli)}; --append: {cli_count(cli_append)}",
        ),
        ("recovery wall time", f"{recovered.wall_s:.2f} s (--append onto a copy: {appended.wall_s:.2f} s)"),
        ("clean mean reward A", f"{mean_a!r}"),
        ("merged mean reward B", f"{mean_b!r} (--append: {mean_b_append!r})"),
        ("equal", f"{yes_no(means_equal and rows_equal)} (means exactly: {yes_no(means_equal)}; "
                  f"rewards row for row by key: {yes_no(rows_equal)})"),
        ("CLI's mean/reward (A, B, --append)", ", ".join("n/a" if m is None else repr(m) for m in cli_means)),
        ("clean rewards = generator's stored rewards", yes_no(clean.rewards == stored)),
    ]  # fmt: skip
    width = max(len(name) for name, _ in table)
    print()
    print(f"| {'':{width}} | value |")
    print(f"|-{'-' * width}-|-------|")
    for name, value in table:
        print(f"| {name:{width}} | {value} |")
    print()
    print("| phase | wall time | judge requests | answered | injected failures |")
    print("|-------|-----------|----------------|----------|-------------------|")
    for phase in (clean, outage, recovered, appended):
        stats = phase.judge
        print(
            f"| {phase.name} | {phase.wall_s:.2f} s | {stats['requests']:,} | {stats['answered']:,} | "
            f"{stats['failed']:,} |"
        )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python benchmarks/judge_recovery.py",
        description="Clean run vs judge outage + --judge-failed-only recovery, with the real CLI and local judge.",
    )
    parser.add_argument("--tasks", type=positive_int, default=2500, help="distinct questions (2500)")
    parser.add_argument("--rollouts-per-task", type=positive_int, default=4, help="rollouts per question (4)")
    parser.add_argument("--share", type=float, default=0.02, help="share of judge requests failing in the outage")
    parser.add_argument("--seed", type=int, default=11, help="data seed, also which requests the outage hits (11)")
    parser.add_argument("--keep", type=Path, metavar="DIR", help="work in DIR (new or empty) and keep every file")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not 0.0 <= args.share <= 1.0:
        parser.error(f"--share must be within 0..1, got {args.share}")
    if args.keep is not None and args.keep.exists() and any(args.keep.iterdir()):
        parser.error(f"--keep {args.keep}: the directory is not empty (reverify refuses to overwrite outputs)")
    work = args.keep or Path(tempfile.mkdtemp(prefix="judge_recovery_"))
    work.mkdir(parents=True, exist_ok=True)
    reverify = reverify_executable()
    env = child_env(work / "dagster_home")
    (work / "dagster_home").mkdir(exist_ok=True)

    spec = QASpec(tasks=args.tasks, rollouts_per_task=args.rollouts_per_task, seed=args.seed)
    started = time.perf_counter()
    inputs, rollouts = write_qa_dataset(work / "data", spec)
    print(f"generated {spec.rows:,} rows in {time.perf_counter() - started:.2f} s into {work / 'data'}")
    judge = LocalJudge.start(reverify, env, work / "judge_serve.log")
    print(f"local judge at {judge.url}")
    try:
        runner = Runner(reverify, env, inputs, judge)
        judge.control(fail_share=0.0, seed=args.seed)
        clean = runner.run("a. clean", rollouts, work / "clean" / "reverified.jsonl")
        print(f"a. clean run: {clean.wall_s:.2f} s")

        judge.control(fail_share=args.share, seed=args.seed)
        outage = runner.run("b. outage", rollouts, work / "outage" / "reverified.jsonl")
        print(f"b. outage run: {outage.wall_s:.2f} s")

        # Copied before any recovery reads it, so the --append run starts from exactly b's files.
        appended_dir = work / "append"
        appended_dir.mkdir()
        for path in (outage.output, outage.sidecar):
            shutil.copy2(path, appended_dir / path.name)
        appended_output = appended_dir / outage.output.name

        judge.control(fail_share=0.0, seed=args.seed)
        recovered = runner.run("c. recovery", outage.output, work / "recovered" / "merged.jsonl", "--judge-failed-only")
        print(f"c. recovery into a new file: {recovered.wall_s:.2f} s")
        judge.control(fail_share=0.0, seed=args.seed)
        appended = runner.run(
            "c. recovery --append", appended_output, appended_output, "--judge-failed-only", "--append"
        )
        print(f"c. recovery --append onto a copy of b: {appended.wall_s:.2f} s")
    except RuntimeError as exc:
        print(f"error: {exc}\nfiles kept in {work}", file=sys.stderr)
        return 1
    finally:
        judge.stop()

    print_report(args, read_rewards(rollouts), clean, outage, recovered, appended)
    if args.keep is None:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"\nfiles kept in {work}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
