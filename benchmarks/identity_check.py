"""The join's identity check (``keys/rollout_identity``): what it costs the key scans, and whether it says a word
about rollouts NeMo Gym made from their inputs.

``--cost DIR``: each file of DIR (``rollouts_materialized_inputs.jsonl``, ``rollouts.jsonl``) scanned as the
start-up scans it, with the prompt fingerprints and without, best of ``--repeat``: the difference is the check's
CPU time. The start-up's own time with the check is ``startup_profile.py``'s.

``--sweep DIR ...``: every pair of files under each DIR (a folder holding both, as the census's
``servers/<name>/data/`` and the conformance sets do) joined with the check, as ``reverify run`` joins them:
how many pairs join, how many the check refuses (naming them), and how many fail for another reason.

    .venv/bin/python benchmarks/identity_check.py --cost /tmp/data1m [--repeat 3]
    .venv/bin/python benchmarks/identity_check.py --sweep /tmp/census/work/servers tests/data ../shared/conformance

Prints, asserts nothing.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from reverify_assets.errors import ReverifyError
from reverify_assets.keys.key_columns import scan_key_columns
from reverify_assets.keys.key_index import KeyIndex, join_rollouts_to_inputs, key_index_of, scan_keys
from reverify_assets.run.preparation import index_inputs

INPUTS, ROLLOUTS = "rollouts_materialized_inputs.jsonl", "rollouts.jsonl"


def scan_seconds(path: Path, *, routes: bool, prompts: bool, rollouts: bool, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.process_time()
        scan_key_columns(path, with_routes=routes, with_prompts=prompts, require_response=rollouts)
        best = min(best, time.process_time() - started)
    return best


def cost(folder: Path, repeat: int) -> None:
    total_with = total_without = 0.0
    for name, routes, rollouts in ((INPUTS, True, False), (ROLLOUTS, False, True)):
        path = folder / name
        with_check = scan_seconds(path, routes=routes, prompts=True, rollouts=rollouts, repeat=repeat)
        without = scan_seconds(path, routes=routes, prompts=False, rollouts=rollouts, repeat=repeat)
        total_with, total_without = total_with + with_check, total_without + without
        print(f"{name}: {without:.2f} s of CPU without the fingerprints, {with_check:.2f} s with them")
    print(f"both scans: {total_without:.2f} s -> {total_with:.2f} s of CPU (+{total_with - total_without:.2f} s)")


def prompted_index(rollouts: Path) -> KeyIndex:
    """The rollouts' index with their prompts, responses or not (the census's example rollouts may lack one)."""
    columns = scan_key_columns(rollouts, with_prompts=True)
    return scan_keys(rollouts, with_prompts=True) if columns is None else key_index_of(rollouts, columns)


def sweep(roots: list[Path]) -> None:
    joined, refused, failed = [], [], []
    for root in roots:
        for inputs in sorted(root.rglob(INPUTS)):
            rollouts = inputs.with_name(ROLLOUTS)
            if not rollouts.is_file():
                continue
            try:
                plan = join_rollouts_to_inputs(index_inputs(inputs).keys, prompted_index(rollouts))
            except ReverifyError as exc:
                (refused if "were not produced from" in str(exc) else failed).append((inputs.parent, str(exc)))
                continue
            joined.append((inputs.parent, plan.height))
    print(
        f"{len(joined)} pairs joined ({sum(rows for _, rows in joined):,} rollouts), {len(refused)} refused by the "
        f"identity check, {len(failed)} failed otherwise"
    )
    for folder, message in refused + failed:
        print(f"  {folder}: {message.splitlines()[0][:300]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cost", type=Path, help="a folder holding the two files")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sweep", type=Path, nargs="+", default=[], help="folders searched for pairs of files")
    args = parser.parse_args()
    if args.cost:
        cost(args.cost, args.repeat)
    if args.sweep:
        sweep(args.sweep)


if __name__ == "__main__":
    main()
