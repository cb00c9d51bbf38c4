"""Dagster's own start-up: how soon a step of an in-process run begins with nothing of ours loaded.

`reverify run` sends its first /verify from its fourth step: the inputs and the rollouts, their join, then
the verify step, in a run it materializes in-process against the SQLite instance in DAGSTER_HOME. This runs
the same shape with four empty assets in a fresh interpreter and a fresh DAGSTER_HOME (our dagster.yaml):
``import dagster``, ``DagsterInstance.get()``, ``materialize()``. The moment the fourth asset's body begins
is the earliest a request sent from a step could leave, whatever the step and the rest of the command do:
the floor under issue 5's first-request target, and under the end-to-end efficiency of a small run.

Times are from the moment the harness starts the interpreter. Prints, asserts nothing.

    .venv/bin/python benchmarks/dagster_floor.py [--repeat 5] [--work DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

CHILD_FLAG = "--child"
# The marks the child reports, in the order they happen; the last is the floor.
MARKS = ("dagster imported", "instance ready", "first step began", "fourth step began")


@dataclass(frozen=True)
class FloorRun:
    seconds: dict[str, float]  # mark -> seconds after the interpreter was started

    @property
    def fourth_step(self) -> float:
        return self.seconds[MARKS[-1]]


def child_main(started_unix: float) -> int:
    """The measured interpreter: only the standard library and Dagster are imported here."""
    seen: dict[str, float] = {}
    import dagster as dg

    seen[MARKS[0]] = time.time()

    @dg.asset
    def inputs() -> int:
        seen.setdefault(MARKS[2], time.time())
        return 0

    @dg.asset
    def rollouts() -> int:
        seen.setdefault(MARKS[2], time.time())
        return 0

    @dg.asset
    def payloads(inputs: int, rollouts: int) -> int:
        return inputs + rollouts

    @dg.asset
    def verify(payloads: int) -> int:
        seen[MARKS[3]] = time.time()
        return payloads

    instance = dg.DagsterInstance.get()
    seen[MARKS[1]] = time.time()
    dg.materialize([inputs, rollouts, payloads, verify], instance=instance)
    print(json.dumps({mark: seen[mark] - started_unix for mark in MARKS}))
    return 0


def measure_floor(work: Path, repeat: int) -> list[FloorRun]:
    """``repeat`` runs, each in a fresh interpreter and a fresh DAGSTER_HOME under ``work``."""
    # Imported by the harness only: the child, which is timed, loads nothing of ours.
    from reverify_assets.defs.instance import DAGSTER_YAML

    runs = []
    for index in range(repeat):
        home = work / f"floor-{index}" / "dagster_home"
        home.mkdir(parents=True)
        (home / "dagster.yaml").write_text(DAGSTER_YAML)
        env = {**os.environ, "DAGSTER_HOME": str(home)}
        started_unix = time.time()
        done = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), CHILD_FLAG, repr(started_unix)],
            capture_output=True,
            env=env,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"the Dagster floor run exited {done.returncode}:\n{done.stderr.decode()[-2000:]}")
        runs.append(FloorRun(json.loads(done.stdout.decode().strip().splitlines()[-1])))
    return runs


def print_floor(runs: Sequence[FloorRun]) -> None:
    print(f"\nDagster alone (four empty assets shaped like the run's, {len(runs)} fresh interpreters and instances):")
    for mark in MARKS:
        values = [run.seconds[mark] for run in runs]
        print(f"  {mark:<20} median {statistics.median(values):.2f} s (min {min(values):.2f}, max {max(values):.2f})")


def median_floor(runs: Sequence[FloorRun]) -> float:
    return statistics.median(run.fourth_step for run in runs)


def main(argv: Sequence[str] | None = None) -> int:
    raw = list(sys.argv[1:] if argv is None else argv)
    if raw[:1] == [CHILD_FLAG]:
        return child_main(float(raw[1]))
    parser = argparse.ArgumentParser(prog="python benchmarks/dagster_floor.py", description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--work", type=Path, help="where the instances go (default: a temporary directory)")
    args = parser.parse_args(raw)
    work = args.work or Path(tempfile.mkdtemp(prefix="reverify_floor_"))
    try:
        print_floor(measure_floor(work, args.repeat))
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
