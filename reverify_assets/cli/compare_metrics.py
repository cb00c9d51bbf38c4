"""Prints the key metrics of two aggregate-metrics files side by side (the demo's last table)."""

from __future__ import annotations

import sys
from pathlib import Path

import orjson


def key_metrics(path: Path) -> dict[str, float]:
    entries = orjson.loads(path.read_bytes())
    return {f"{e['agent_ref']['name']}  {name}": v for e in entries for name, v in e.get("key_metrics", {}).items()}


def main(left: str, right: str) -> None:
    a, b = key_metrics(Path(left)), key_metrics(Path(right))
    names = list(dict.fromkeys([*a, *b]))
    width = max(len(n) for n in names)
    left_title, right_title = (
        Path(left).stem.removesuffix("_aggregate_metrics"),
        Path(right).stem.removesuffix("_aggregate_metrics"),
    )
    print(f"{'key metric':<{width}}  {left_title:>28}  {right_title:>28}")
    for name in names:
        print(f"{name:<{width}}  {a.get(name, float('nan')):>28.4f}  {b.get(name, float('nan')):>28.4f}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
