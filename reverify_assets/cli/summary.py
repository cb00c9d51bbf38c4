"""What ``reverify run`` prints when it is done: the files, the counts, the key metrics."""

from __future__ import annotations

from typing import Any

import orjson

from reverify_assets.defs.materialization import MaterializedRun


def _value(metadata: dict[str, Any], name: str) -> Any:
    entry = metadata.get(name)
    return getattr(entry, "value", entry)


def print_run_summary(run: MaterializedRun, *, disable_aggregation: bool) -> None:
    meta = run.verification_metadata
    unsafe = bool(_value(meta, "unsafe"))
    if unsafe:
        print("WARNING: rewards came from servers not declared stateless; files are prefixed with 'unsafe_'.")
    mean = _value(meta, "mean reward")
    print(f"Output:   {run.output.path} ({run.output.rows} rows)")
    print(f"Failures: {run.failures.path} ({run.failures.rows} rows)")
    failures = _value(meta, "failures by class") or {}
    if failures:
        by_class = ", ".join(f"{count} {name}" for name, count in failures.items())
        print(f"Rollouts missing from the score: {run.failures.rows} ({by_class})")
    if mean is not None:
        print(f"Mean reward: {mean:.4f}")
    if disable_aggregation:
        print("Aggregation disabled: run `reverify aggregate` after all shards finish.")
    elif run.metrics is not None:
        print(f"Metrics:  {run.metrics.path}")
        for entry in orjson.loads(open(run.metrics.path, "rb").read()):
            print(f"  {entry['agent_ref']['name']}: {orjson.dumps(entry.get('key_metrics', {})).decode()}")
    print(f"Dagster run: {run.run_id}")
