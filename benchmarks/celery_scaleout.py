"""A rescoring on Celery workers, timed: `reverify backfill --submit` of one synthetic mcqa run on 1 and on 2
workers, against today's local `reverify backfill --parallel P` on the same files.

For each worker count W: a fresh project folder and DAGSTER_HOME (deploy/celery/dagster.yaml unchanged), a
throwaway PostgreSQL and Redis, the Dagster daemon and W dagster-celery workers (plain processes on this
machine: the figures are about Dagster and Celery's overheads, not the network), then the backfill, timed from
the command's start to its end, once every worker has said it is ready. Then
`reverify backfill --parallel P` for each P on a fresh SQLite home. Every merged output must equal the first.

A benchmark, not a test: it prints figures and asserts nothing about time; it exits 1 only when a command
fails or the outputs differ. Holds the benchmark lock (bench_lock.py).

    .venv/bin/python benchmarks/celery_scaleout.py [--tasks 25000] [--shards 16] [--workers 1,2] [--parallel 1,2]
"""

from __future__ import annotations

import argparse
import filecmp
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from bench_lock import exclusive

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # tests.support: the same cluster pieces the end-to-end test starts

from tests.support.cluster import (  # noqa: E402
    VENV_BIN,
    celery_worker,
    dagster_daemon,
    deployment_env,
    redis_server,
    stop,
)
from tests.support.postgres import throwaway_postgres  # noqa: E402
from tests.support.project import LENIENT, Project, make_project  # noqa: E402

NAME = "scaleout"
CELERY_CONFIG = REPO / "deploy" / "celery" / "celery.yaml"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=25_000, help="4 rollouts each (default: 100,000 rows)")
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--workers", default="1,2", help="worker counts to time, comma-separated")
    parser.add_argument("--parallel", default="1,2", help="local --parallel levels to time, comma-separated")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="reverify-celery-bench-"))
    merged: list[Path] = []
    try:
        with exclusive("celery scale-out benchmark"):
            for workers in [int(n) for n in args.workers.split(",")]:
                seconds, output = on_celery(work / f"celery{workers}", args.tasks, args.shards, workers)
                report(f"--submit, {workers} Celery worker(s)", seconds, args.tasks * 4, args.shards)
                merged.append(output)
            for parallel in [int(n) for n in args.parallel.split(",")]:
                seconds, output = local(work / f"local{parallel}", args.tasks, args.shards, parallel)
                report(f"local --parallel {parallel}", seconds, args.tasks * 4, args.shards)
                merged.append(output)
        different = [path for path in merged[1:] if not filecmp.cmp(merged[0], path, shallow=False)]
        if different:
            print(f"merged outputs differ from {merged[0]}: {different}", file=sys.stderr)
            return 1
        print(f"all {len(merged)} merged outputs are identical")
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


def project_in(folder: Path, tasks: int, shards: int) -> Project:
    project = make_project(folder, tasks=tasks, rollouts_per_task=4, name=NAME)
    project.write_rescoring(override=LENIENT, shard_tasks=math.ceil(tasks / shards))
    return project


def on_celery(folder: Path, tasks: int, shards: int, workers: int) -> tuple[float, Path]:
    project = project_in(folder, tasks, shards)
    home = folder / "dagster_home"
    home.mkdir()
    shutil.copy(REPO / "deploy" / "celery" / "dagster.yaml", home / "dagster.yaml")
    with ExitStack() as cluster:
        postgres = cluster.enter_context(throwaway_postgres())
        redis = cluster.enter_context(redis_server())
        env = deployment_env(home, CELERY_CONFIG, postgres, redis)
        logs = [folder / f"worker{number}.log" for number in range(1, workers + 1)]
        for number, log in enumerate(logs, 1):
            cluster.callback(stop, celery_worker(f"worker{number}", CELERY_CONFIG, env, cwd=project.root, log=log))
        cluster.callback(stop, dagster_daemon(project.root / "workspace.yaml", env, log=folder / "daemon.log"))
        shards_registered = command(["shards", NAME, "--project", str(project.root)], env)
        print(shards_registered.splitlines()[0])
        wait_for_ready(logs)  # every worker, so that the clock starts with all of them taking steps
        started = time.monotonic()
        command(["backfill", NAME, "--project", str(project.root), "--submit", "--worker-wait", "120"], env)
        return time.monotonic() - started, next(project.results().glob("*/merged.jsonl"))


def wait_for_ready(logs: list[Path], timeout_s: float = 300.0) -> None:
    """Until each worker's log has Celery's "ready." line."""
    deadline = time.monotonic() + timeout_s
    while not all(log.exists() and " ready." in log.read_text(errors="replace") for log in logs):
        if time.monotonic() > deadline:
            raise SystemExit(f"the workers were not ready within {timeout_s:.0f} s: see {', '.join(map(str, logs))}")
        time.sleep(0.5)


def local(folder: Path, tasks: int, shards: int, parallel: int) -> tuple[float, Path]:
    project = project_in(folder, tasks, shards)
    env = {"DAGSTER_HOME": str(folder / "dagster_home")}
    command(["shards", NAME, "--project", str(project.root)], env)
    started = time.monotonic()
    command(["backfill", NAME, "--project", str(project.root), "--parallel", str(parallel)], env)
    return time.monotonic() - started, next(project.results().glob("*/merged.jsonl"))


def command(args: list[str], env: dict[str, str]) -> str:
    result = subprocess.run(
        [str(VENV_BIN / "reverify"), *args], env={**os.environ, **env}, capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise SystemExit(f"reverify {' '.join(args)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result.stdout


def report(label: str, seconds: float, rows: int, shards: int) -> None:
    print(f"{label:32} {seconds:7.1f} s  {rows / seconds:8,.0f} rows/s  {shards / seconds * 60:5.1f} shards/min")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
