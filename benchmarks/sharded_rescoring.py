"""Sharded rescoring, end to end with the real CLI: where does the time of `reverify backfill` go?

Generates a synthetic mcqa run (`reverify_assets.synthetic.mcqa_rollouts`, seed 1), lays out a throwaway project
around it with one rescoring (`configs/mcqa.yaml`, the built-in mcqa server, `lenient_boxed` override) whose
`shard_tasks` gives the wanted number of shards, then for each parallel level P:

a. a fresh project folder (so a fresh output dir and index cache) and a fresh DAGSTER_HOME;
b. `reverify shards <name>` then `reverify backfill <name> --parallel P`, both timed from outside;
c. the run records and step events read back from that Dagster instance: the span of the shard runs, the
   aggregate run, and per shard the run duration, the `<name>__rescore_shard` step's (the shard's plan and
   its verification) and what Dagster itself adds around it (run duration - step duration).

Then one unsharded `reverify run` over the same files (its own DAGSTER_HOME) for comparison, and a check that
every level's `<output_dir>/<config hash>/merged.jsonl` has the same rows and rewards by key as it.

A benchmark, not a test: it prints figures and asserts nothing about time. It fails (exit 1) only when a command
fails. Every CLI run (and the data generation) holds an exclusive flock on /tmp/reverify-bench.lock, so two
benchmarks started at once on a small machine take turns instead of distorting each other's figures.

    .venv/bin/python benchmarks/sharded_rescoring.py [--tasks 25000] [--rollouts-per-task 4] [--shards 16]
        [--parallel-levels 1,2] [--data DIR] [--keep DIR]
"""

from __future__ import annotations

import argparse
import filecmp
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg
import orjson

# Run as a script, this file's folder is on sys.path: the lock helper every benchmark here shares.
from bench_lock import LOCK_PATH, exclusive

from reverify_assets.defs.rescoring_defs import build_rescoring
from reverify_assets.rescoring.spec import find_rescoring
from reverify_assets.synthetic.mcqa_rollouts import (
    INPUTS_FILE_NAME,
    ROLLOUTS_FILE_NAME,
    SyntheticSpec,
    write_mcqa_dataset,
)
from reverify_assets.synthetic.nemo_gym_rows import positive_int

REPO = Path(__file__).resolve().parents[1]
NAME = "bench"
SEED = 1
LENIENT = "++mcqa.resources_servers.mcqa.grading_mode=lenient_boxed"
VERIFY_STEP = f"{NAME}__rescore_shard"
REVERIFIED_ASSET = dg.AssetKey([NAME, "reverified_shard"])
PARTITION_TAG = "dagster/partition/shard"
DATA_MARKER = "sharded_rescoring_data.json"

Key = tuple[int, int]


# --- the lock shared with other benchmarks --------------------------------------------------------------------


@dataclass
class BenchLock:
    """bench_lock.exclusive, remembering every wait so the report can own up to it at the end."""

    waits: list[tuple[str, float]] = field(default_factory=list)

    @contextmanager
    def held(self, what: str) -> Iterator[None]:
        with exclusive(what) as waited:
            if waited:
                self.waits.append((what, waited))
            yield


# --- data and the throwaway project -----------------------------------------------------------------------------


def ensure_data(folder: Path, spec: SyntheticSpec, lock: BenchLock) -> tuple[Path, Path]:
    """The two NeMo Gym files for `spec` in `folder`, generated unless an earlier run left the same ones there."""
    inputs, rollouts = folder / INPUTS_FILE_NAME, folder / ROLLOUTS_FILE_NAME
    marker = folder / DATA_MARKER
    wanted = {"tasks": spec.tasks, "rollouts_per_task": spec.rollouts_per_task, "seed": spec.seed}
    if marker.is_file() and orjson.loads(marker.read_bytes()) == wanted and inputs.is_file() and rollouts.is_file():
        print(f"reusing {spec.rows:,} rows in {folder}")
        return inputs, rollouts
    marker.unlink(missing_ok=True)
    # Generation is as CPU-bound as a measurement: doing it under the lock keeps it out of others' figures.
    with lock.held("generating the data"):
        started = time.perf_counter()
        write_mcqa_dataset(folder, spec)
        elapsed = time.perf_counter() - started
    # Written last: a generation killed half-way leaves no marker, so the next --data run regenerates.
    marker.write_bytes(orjson.dumps(wanted))
    print(f"generated {spec.rows:,} rows in {elapsed:.1f} s into {folder}")
    return inputs, rollouts


def shard_tasks_for(tasks: int, shards: int) -> int:
    return math.ceil(tasks / shards)


def make_project(root: Path, inputs: Path, rollouts: Path, shard_tasks: int) -> Path:
    """The layout of tests/support/project.py: the shipped mcqa config, workspace and definitions, one rescoring."""
    (root / "configs" / "rescorings").mkdir(parents=True)
    shutil.copy(REPO / "configs" / "mcqa.yaml", root / "configs" / "mcqa.yaml")
    shutil.copy(REPO / "workspace.yaml", root / "workspace.yaml")
    shutil.copy(REPO / "definitions.py", root / "definitions.py")
    # json.dumps quotes the paths: a JSON string is a valid YAML scalar whatever the temp dir is called.
    (root / "configs" / "rescorings" / f"{NAME}.yaml").write_text(
        "description: sharded rescoring benchmark\n"
        f'verifier:\n  config: [configs/mcqa.yaml]\n  overrides: ["{LENIENT}"]\n'
        f"sources:\n  inputs: {json.dumps(str(inputs))}\n  rollouts: {json.dumps(str(rollouts))}\n"
        f"shard_tasks: {shard_tasks}\noutput_dir: results/{NAME}\n"
    )
    return root


def merged_output(project: Path) -> Path:
    """`<output_dir>/<config hash>/merged.jsonl`, as the product itself lays it out."""
    return build_rescoring(find_rescoring(project, NAME)).layout.merged


# --- running the CLI --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Timed:
    wall_s: float
    started_at: float  # unix time, comparable with Dagster's run start/end times
    ended_at: float
    stdout: str


def reverify_executable() -> str:
    """The `reverify` next to this interpreter (the project's venv), else the one on PATH."""
    beside = Path(sys.executable).parent / "reverify"
    found = str(beside) if beside.is_file() else shutil.which("reverify")
    if not found:
        raise SystemExit("error: no `reverify` command next to this Python or on PATH (install the project first)")
    return found


def run_cli(reverify: str, args: Sequence[str | Path], *, home: Path, cwd: Path, lock: BenchLock) -> Timed:
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    command = [reverify, *map(str, args)]
    label = f"`reverify {args[0]}`" + (f" (--parallel {args[-1]})" if args[0] == "backfill" else "")
    with lock.held(label):
        started_at, started = time.time(), time.perf_counter()
        result = subprocess.run(command, capture_output=True, text=True, env=env, cwd=cwd)
        wall_s, ended_at = time.perf_counter() - started, time.time()
    if result.returncode != 0:
        raise RuntimeError(f"`{' '.join(command)}` exited {result.returncode}:\n{result.stdout}\n{result.stderr}")
    return Timed(wall_s, started_at, ended_at, result.stdout)


# --- reading the Dagster instance -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ShardRun:
    shard: str
    rows: int | None
    start: float
    end: float
    steps: dict[str, tuple[float, float]]  # step key -> (start, end), unix time

    @property
    def run_s(self) -> float:
        return self.end - self.start

    def step_s(self, key: str) -> float | None:
        window = self.steps.get(key)
        return None if window is None else window[1] - window[0]

    @property
    def steps_s(self) -> float:
        return sum(end - start for start, end in self.steps.values())

    @property
    def overhead_s(self) -> float:
        """What Dagster spends in the run outside every step (run start/end events, planning, storage writes)."""
        return self.run_s - self.steps_s


@dataclass(frozen=True)
class Runs:
    shards: list[ShardRun]
    aggregate: tuple[float, float] | None  # (start, end) of the aggregate run
    aggregate_step_s: float | None  # its one step, the merge and the metrics
    registered: int


def step_windows(instance: dg.DagsterInstance, run_id: str) -> tuple[dict[str, tuple[float, float]], int | None]:
    """Each finished step's (start, end), and the rows the verify step's materialization recorded."""
    kinds = {
        dg.DagsterEventType.STEP_START,
        dg.DagsterEventType.STEP_SUCCESS,
        dg.DagsterEventType.STEP_FAILURE,
        dg.DagsterEventType.ASSET_MATERIALIZATION,
    }
    starts: dict[str, float] = {}
    windows: dict[str, tuple[float, float]] = {}
    rows = None
    for entry in instance.all_logs(run_id, of_type=kinds):
        kind = entry.dagster_event_type
        if kind == dg.DagsterEventType.STEP_START and entry.step_key:
            starts[entry.step_key] = entry.timestamp
        elif kind == dg.DagsterEventType.ASSET_MATERIALIZATION:
            materialization = entry.asset_materialization
            if materialization is not None and materialization.asset_key == REVERIFIED_ASSET:
                value = materialization.metadata.get("rows")
                rows = getattr(value, "value", value)
        elif entry.step_key in starts:
            windows[entry.step_key] = (starts[entry.step_key], entry.timestamp)
    return windows, rows


def read_runs(home: Path) -> Runs:
    with dg.DagsterInstance.from_config(str(home)) as instance:
        shards: list[ShardRun] = []
        aggregate, aggregate_step_s = None, None
        for record in instance.get_run_records():
            if record.start_time is None or record.end_time is None:
                raise RuntimeError(f"run {record.dagster_run.run_id} has no start or end time in {home}")
            partition = record.dagster_run.tags.get(PARTITION_TAG)
            steps, rows = step_windows(instance, record.dagster_run.run_id)
            if partition is None:  # the backfill's one unpartitioned run is the aggregate
                aggregate = (record.start_time, record.end_time)
                aggregate_step_s = sum(end - start for start, end in steps.values()) if steps else None
                continue
            shards.append(ShardRun(partition, rows, record.start_time, record.end_time, steps))
        registered = len(instance.get_dynamic_partitions(f"{NAME}_shards"))
    return Runs(sorted(shards, key=lambda run: run.shard), aggregate, aggregate_step_s, registered)


# --- comparing outputs ------------------------------------------------------------------------------------------


def rewards_by_key(path: Path) -> tuple[dict[Key, float], int]:
    """Rewards by key, and the number of lines (more lines than keys would mean a duplicated key)."""
    rewards: dict[Key, float] = {}
    lines = 0
    with path.open("rb") as fh:
        for line in fh:
            row = orjson.loads(line)
            rewards[(row["_ng_task_index"], row["_ng_rollout_index"])] = row["reward"]
            lines += 1
    return rewards, lines


def yes_no(value: bool) -> str:
    return "yes" if value else "no"


# --- the report -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Level:
    parallel: int
    shards_cmd: Timed
    backfill: Timed
    runs: Runs
    merged: Path


def seconds(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f} s"


def spread(values: Sequence[float | None]) -> str:
    known = [v for v in values if v is not None]
    return f"{statistics.median(known):.2f} s / {max(known):.2f} s" if known else "n/a"


def print_table(rows: Sequence[tuple[str, str]]) -> None:
    width = max(len(name) for name, _ in rows)
    print(f"| {'':{width}} | value |")
    print(f"|-{'-' * width}-|-------|")
    for name, value in rows:
        print(f"| {name:{width}} | {value} |")


def print_level(level: Level, total_rows: int) -> None:
    shards, backfill = level.runs.shards, level.backfill
    print(f"\n## reverify backfill {NAME} --parallel {level.parallel}\n")
    if not shards:
        print("no shard runs recorded")
        return
    first_start, last_end = min(r.start for r in shards), max(r.end for r in shards)
    span = last_end - first_start
    run_sum = sum(r.run_s for r in shards)
    agg = level.runs.aggregate
    tail_end = agg[1] if agg else last_end
    table = [
        ("shards registered / shard runs", f"{level.runs.registered} / {len(shards)}"),
        ("`reverify shards` wall time", seconds(level.shards_cmd.wall_s)),
        ("`reverify backfill` wall time", seconds(backfill.wall_s)),
        ("first shard run start -> last shard run end", seconds(span)),
        ("sum of shard run durations", f"{run_sum:.2f} s (÷ span = {run_sum / span:.2f} runs at once on average)"),
        ("last shard run end -> aggregate run start", seconds(agg[0] - last_end if agg else None)),
        (
            "aggregate run duration",
            f"{seconds(agg[1] - agg[0] if agg else None)} (its step: {seconds(level.runs.aggregate_step_s)})",
        ),
        ("command start -> first shard run start", seconds(first_start - backfill.started_at)),
        ("last run end -> command exit", seconds(backfill.ended_at - tail_end)),
        ("rows/s end to end (backfill)", f"{total_rows / backfill.wall_s:,.0f}"),
        ("rows/s end to end (shards + backfill)", f"{total_rows / (backfill.wall_s + level.shards_cmd.wall_s):,.0f}"),
    ]  # fmt: skip
    print_table(table)
    print()
    print("| shard | rows | run | plan + verify step | run - step |")
    print("|-------|------|-----|--------------------|------------|")
    for run in shards:
        print(
            f"| {run.shard} | {run.rows if run.rows is not None else '?'} | {seconds(run.run_s)} | "
            f"{seconds(run.step_s(VERIFY_STEP))} | {seconds(run.overhead_s)} |"
        )
    print(
        f"| **median / max** | | {spread([r.run_s for r in shards])} | "
        f"{spread([r.step_s(VERIFY_STEP) for r in shards])} | {spread([r.overhead_s for r in shards])} |"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python benchmarks/sharded_rescoring.py",
        description="Time `reverify backfill --parallel P` over S shards against one unsharded `reverify run`.",
    )
    parser.add_argument("--tasks", type=positive_int, default=25_000, help="distinct questions (25000)")
    parser.add_argument("--rollouts-per-task", type=positive_int, default=4, help="rollouts per question (4)")
    parser.add_argument("--shards", type=positive_int, default=16, help="shards wanted; sets shard_tasks (16)")
    parser.add_argument(
        "--parallel-levels", type=parallel_levels, default=[1, 2], help="comma-separated --parallel values (1,2)"
    )
    parser.add_argument("--data", type=Path, metavar="DIR", help="generate the data here once, reuse it afterwards")
    parser.add_argument("--keep", type=Path, metavar="DIR", help="work in DIR (new or empty) and keep every file")
    return parser


def parallel_levels(value: str) -> list[int]:
    try:
        return [positive_int(part.strip()) for part in value.split(",") if part.strip()] or [1]
    except argparse.ArgumentTypeError as exc:
        raise argparse.ArgumentTypeError(f"--parallel-levels {value!r}: {exc}") from None


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.keep is not None and args.keep.exists() and any(args.keep.iterdir()):
        parser.error(f"--keep {args.keep}: the directory is not empty (reverify refuses to overwrite outputs)")
    work = (args.keep or Path(tempfile.mkdtemp(prefix="sharded_rescoring_"))).resolve()
    work.mkdir(parents=True, exist_ok=True)
    reverify = reverify_executable()
    lock = BenchLock()

    spec = SyntheticSpec(tasks=args.tasks, rollouts_per_task=args.rollouts_per_task, seed=SEED)
    shard_tasks = shard_tasks_for(args.tasks, args.shards)
    shard_count = math.ceil(args.tasks / shard_tasks)
    print(f"machine: {os.cpu_count()} CPUs; work dir {work}")
    print(
        f"{spec.rows:,} rows ({args.tasks:,} tasks × {args.rollouts_per_task}, seed {SEED}); shard_tasks {shard_tasks} "
        f"-> {shard_count} shards" + ("" if shard_count == args.shards else f" (asked for {args.shards})")
    )
    inputs, rollouts = ensure_data((args.data or work / "data").resolve(), spec, lock)

    levels: list[Level] = []
    try:
        for parallel in args.parallel_levels:
            base = work / f"parallel_{parallel}"
            project = make_project(base / "project", inputs, rollouts, shard_tasks)
            home = base / "dagster_home"
            shards_cmd = run_cli(reverify, ["shards", NAME, "--project", project], home=home, cwd=project, lock=lock)
            backfill = run_cli(
                reverify,
                ["backfill", NAME, "--project", project, "--parallel", str(parallel)],
                home=home,
                cwd=project,
                lock=lock,
            )
            print(f"--parallel {parallel}: shards {shards_cmd.wall_s:.2f} s, backfill {backfill.wall_s:.2f} s")
            levels.append(Level(parallel, shards_cmd, backfill, read_runs(home), merged_output(project)))

        single_dir = work / "unsharded"
        single = single_dir / "reverified.jsonl"
        single_dir.mkdir()
        unsharded = run_cli(
            reverify,
            ["run", "--config", REPO / "configs" / "mcqa.yaml", "--inputs", inputs, "--rollouts", rollouts,
             "--output", single, LENIENT],
            home=single_dir / "dagster_home",
            cwd=single_dir,
            lock=lock,
        )  # fmt: skip
        print(f"unsharded run: {unsharded.wall_s:.2f} s")
    except RuntimeError as exc:
        print(f"error: {exc}\nfiles kept in {work}", file=sys.stderr)
        return 1

    for level in levels:
        print_level(level, spec.rows)

    print("\n## unsharded `reverify run` vs the sharded merged output\n")
    expected, expected_lines = rewards_by_key(single)
    table = [
        ("unsharded `reverify run` wall time", seconds(unsharded.wall_s)),
        ("unsharded rows/s", f"{spec.rows / unsharded.wall_s:,.0f}"),
        ("unsharded rows", f"{len(expected):,} keys in {expected_lines:,} lines"),
    ]
    for level in levels:
        merged, merged_lines = rewards_by_key(level.merged)
        same = merged == expected and merged_lines == expected_lines == len(expected)
        table.append(
            (
                f"--parallel {level.parallel}: backfill / unsharded",
                f"{level.backfill.wall_s / unsharded.wall_s:.2f}× the time "
                f"({(level.backfill.wall_s + level.shards_cmd.wall_s) / unsharded.wall_s:.2f}× with `shards`)",
            )
        )
        table.append(
            (
                f"--parallel {level.parallel}: merged = unsharded (rows, rewards by key)",
                f"{yes_no(same)} ({len(merged):,} keys in {merged_lines:,} lines; "
                f"byte-identical: {yes_no(filecmp.cmp(level.merged, single, shallow=False))})",
            )
        )
    print_table(table)

    waits = ", ".join(f"{what} {waited:.1f} s" for what, waited in lock.waits)
    print(f"\nlock {LOCK_PATH}: " + (f"had to wait: {waits}" if waits else "never had to wait"))
    if args.keep is None:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"files kept in {work}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
