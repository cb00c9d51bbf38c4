"""The judge-call cache, end to end with the real CLI: what a second run of an unchanged judge config costs.

Generates a synthetic free-form QA run (`reverify_assets.synthetic.qa_rollouts`), starts the local judge model
(`reverify judge-serve --port 0`, optionally slowed by `--latency-ms`, as a remote judge is) and runs `reverify
run` with `configs/judge.yaml` three times in one fresh DAGSTER_HOME:

a. first: an empty cache, every verdict asked of the judge;
b. second: the same command with `--overwrite`: every verdict should come from the cache;
c. uncached: the same again with `--no-judge-cache`, the cost the cache saves.

It prints each run's wall time, the judge's request count (what the judge saw) and the CLI's own "Judge calls"
line, the cache file's size, and whether the three outputs hold the same rewards row for row.

    .venv/bin/python benchmarks/judge_cache.py [--tasks 2500] [--rollouts-per-task 4] [--latency-ms 0] [--keep DIR]
"""

from __future__ import annotations

import argparse
import re
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from judge_recovery import LocalJudge, Phase, Runner, child_env, reverify_executable

from reverify_assets.judge_cache.store import CACHE_FILE_NAME, JUDGE_CACHE_ENV
from reverify_assets.synthetic.nemo_gym_rows import positive_int
from reverify_assets.synthetic.qa_rollouts import QASpec, write_qa_dataset

JUDGE_CALLS = re.compile(r"Judge calls: .*")


def measure(args: argparse.Namespace, work: Path) -> None:
    spec = QASpec(tasks=args.tasks, rollouts_per_task=args.rollouts_per_task, seed=args.seed)
    inputs, rollouts = write_qa_dataset(work / "data", spec)
    home = work / "dagster_home"
    env = child_env(home)
    env.pop(JUDGE_CACHE_ENV, None)  # the user's default: the cache in the Dagster home
    reverify = reverify_executable()
    judge = LocalJudge.start(reverify, env, work / "judge_serve.log")
    try:
        runner = Runner(reverify, env, inputs, judge)
        output = work / "out" / "reverified.jsonl"
        phases: list[Phase] = []
        runs = (("first", ()), ("second", ("--overwrite",)), ("uncached", ("--overwrite", "--no-judge-cache")))
        for name, flags in runs:
            judge.control(fail_share=0.0, seed=0, latency_ms=args.latency_ms)
            phases.append(runner.run(name, rollouts, output, *flags))
    finally:
        judge.stop()
    rows = len(phases[0].rewards)
    cache = home / CACHE_FILE_NAME
    print(f"{rows:,} rows ({args.tasks:,} tasks x {args.rollouts_per_task}), judge latency {args.latency_ms} ms")
    print(f"cache file: {cache} ({cache.stat().st_size / 1e6:.1f} MB)")
    print()
    print("| run | wall time | judge requests | the CLI's line |")
    print("| --- | ---: | ---: | --- |")
    for phase in phases:
        said = JUDGE_CALLS.search(phase.stdout)
        line = said.group(0) if said else "-"
        print(f"| {phase.name} | {phase.wall_s:.2f} s | {phase.judge['requests']:,} | {line} |")
    same = all(phase.rewards == phases[0].rewards for phase in phases)
    print()
    print(f"same rewards row for row in all three runs: {'yes' if same else 'NO'}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python benchmarks/judge_cache.py", description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=positive_int, default=2500)
    parser.add_argument("--rollouts-per-task", type=positive_int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--latency-ms", type=int, default=0, help="the local judge's delay per request")
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it (default: a temporary one)")
    args = parser.parse_args(argv)
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        measure(args, args.keep)
        return 0
    work = Path(tempfile.mkdtemp(prefix="reverify-judge-cache-"))
    try:
        measure(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
