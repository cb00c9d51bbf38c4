"""Speed and memory of the ``/aggregate_metrics`` answer (mcqa hooks) over N stripped verify responses.

Each measurement runs in a fresh process, holding the machine's benchmark lock (see ``bench_lock``):

* ``in-memory``: ``aggregate_metrics(rows, mcqa hooks)`` over a list of rows (the servers' route);
* ``streaming``: ``MetricsAccumulator`` fed the same list in key order, then ``write_answer`` to a
  temporary file, as the CLI writes its entry (``agent_ref`` first, no ``perf_summary``);
* ``streaming, lazy rows``: the same, the rows made (or read) one at a time, so the process holds no rows:
  its peak RSS growth is the accumulator's own (the time includes making the rows).

Timed spans exclude making or reading the rows. ``scipy.special`` (the t-interval) is imported before
timing and its one-time import cost printed apart. Rows are synthetic (seeded, shaped like a reverified
mcqa run's stripped rows) or read from ``--jsonl`` (a reverify output, sorted by key; stripped as the
CLI strips them). Prints figures; asserts nothing.

    .venv/bin/python benchmarks/metrics_speed.py [--rows 100000 1000000] [--jsonl FILE] [--seed 0]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_lock import exclusive

MODES = ("in-memory", "streaming", "streaming, lazy rows")
ROLLOUTS = 4
LETTERS = "ABCDEFGHIJ"


def synthetic_rows(count: int, seed: int) -> Iterator[dict[str, Any]]:
    """Stripped mcqa verify responses in key order: 4 rollouts a task, shared sub-dicts where a real row
    has equal ones (the aggregation only reads them)."""
    rnd = random.Random(seed)
    agent_ref = {"type": "responses_api_agents", "name": "mcqa_simple_agent"}
    provenance = {"config_hash": "03e4d48f1ccb", "server": "mcqa", "type": "mcqa", "reverify_mode": "stateless"}
    for position in range(count):
        task, rollout = divmod(position, ROLLOUTS)
        if rollout == 0:
            expected = rnd.choice(LETTERS)
            skill = rnd.random()
            prompt = rnd.randint(80, 420)
        answer = None if rnd.random() < 0.05 else expected if rnd.random() < skill else rnd.choice(LETTERS)
        output = rnd.randint(20, 1500)
        yield {
            "response": {
                "usage": {
                    "input_tokens": prompt,
                    "input_tokens_details": {"cached_tokens": 0},
                    "output_tokens": output,
                    "output_tokens_details": {"reasoning_tokens": output // 2},
                    "total_tokens": prompt + output,
                }
            },
            "reward": 1.0 if answer == expected else 0.0,
            "mask_sample": False,
            "failure_kind": None,
            "failure_reason": None,
            "expected_answer": expected,
            "extracted_answer": answer,
            "_ng_task_index": task,
            "_ng_rollout_index": rollout,
            "agent_ref": agent_ref,
            "reverify_provenance": provenance,
        }


def file_rows(path: Path, count: int) -> Iterator[dict[str, Any]]:
    import orjson

    from reverify_assets.rows.row_fields import strip_for_aggregation

    with path.open("rb") as handle:
        for position, line in enumerate(handle):
            if position == count:
                return
            yield strip_for_aggregation(orjson.loads(line))


def rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(mode: str, count: int, seed: int, jsonl: str | None) -> dict[str, Any]:
    """One measurement, in this process (a fresh one)."""
    started = time.perf_counter()
    from scipy.special import stdtrit  # noqa: F401  (its import is a one-time cost, shown apart)

    scipy_import = time.perf_counter() - started
    import orjson

    from reverify_assets.metrics import MetricsAccumulator, aggregate_metrics, mcqa

    hooks = {"compute_metrics": mcqa.compute_metrics, "get_key_metrics": mcqa.get_key_metrics}

    def rows() -> Iterator[dict[str, Any]]:
        return file_rows(Path(jsonl), count) if jsonl else synthetic_rows(count, seed)

    held = None if mode == "streaming, lazy rows" else list(rows())
    start_rss = rss_mb()
    entry_fields: dict[str, Any] = {"prefix_fields": {"agent_ref": {"name": "bench"}}, "drop": ("perf_summary",)}
    with tempfile.TemporaryFile() as out:
        started = time.perf_counter()
        if mode == "in-memory":
            answer = aggregate_metrics(held, **hooks)  # type: ignore[arg-type]
            seconds = time.perf_counter() - started
            peak = peak_rss_mb()
            answer.pop("perf_summary")
            out.write(orjson.dumps({**entry_fields["prefix_fields"], **answer}))
        else:
            with MetricsAccumulator(**hooks) as accumulator:
                for row in held if held is not None else rows():
                    accumulator.add(row)
                accumulator.write_answer(out, **entry_fields)
            seconds = time.perf_counter() - started
            peak = peak_rss_mb()
        answer_bytes = out.tell()
        out.seek(0)
        digest = hashlib.sha256()
        while chunk := out.read(1 << 20):
            digest.update(chunk)
    return {
        "mode": mode,
        "rows": count,
        "seconds": seconds,
        "rows_per_second": count / seconds,
        "scipy_import_seconds": scipy_import,
        "rss_start_mb": start_rss,
        "rss_peak_mb": peak,
        "rss_growth_mb": peak - start_rss,
        "answer_bytes": answer_bytes,
        "answer_sha256": digest.hexdigest()[:16],
    }


def run_child(mode: str, count: int, seed: int, jsonl: str | None) -> dict[str, Any]:
    command = [sys.executable, __file__, "--child", mode, "--rows", str(count), "--seed", str(seed)]
    if jsonl:
        command += ["--jsonl", jsonl]
    with exclusive(f"metrics_speed {mode} {count}"):
        done = subprocess.run(command, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--jsonl", help="read rows from this reverify output instead of making them")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child, args.rows[0], args.seed, args.jsonl)))
        return

    results = []
    print(
        f"{'mode':22s} {'rows':>9s} {'seconds':>8s} {'rows/s':>9s} {'RSS start':>10s} {'growth':>8s}"
        f"  {'scipy import':>12s}  answer (CLI entry)"
    )
    for count in args.rows:
        for mode in args.modes:
            result = run_child(mode, count, args.seed, args.jsonl)
            results.append(result)
            print(
                f"{mode:22s} {count:9d} {result['seconds']:8.3f} {result['rows_per_second']:9.0f} "
                f"{result['rss_start_mb']:8.1f}MB {result['rss_growth_mb']:6.1f}MB"
                f"  {result['scipy_import_seconds']:10.3f} s  {result['answer_bytes']} B {result['answer_sha256']}",
                flush=True,
            )
    lazy = {result["rows"]: result for result in results if result["mode"] == "streaming, lazy rows"}
    if len(lazy) >= 2:
        low, high = min(lazy), max(lazy)
        low_peak, high_peak = lazy[low]["rss_peak_mb"], lazy[high]["rss_peak_mb"]
        print(
            f"streaming, lazy rows: peak RSS {low_peak:.1f} MB at {low} rows, {high_peak:.1f} MB at {high} rows "
            f"(+{(high_peak - low_peak) / low_peak:.1%})"
        )


if __name__ == "__main__":
    main()
