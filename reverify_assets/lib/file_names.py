"""The names of the files a run writes next to its output, as NeMo Gym names them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

UNSAFE_PREFIX = "unsafe_"
FAILURES_SUFFIX = "_failures"
AGGREGATE_SUFFIX = "_aggregate_metrics"
MATERIALIZED_INPUTS_SUFFIX = "_materialized_inputs"


def sidecar_path(output: Path) -> Path:
    return output.with_name(f"{output.stem}{FAILURES_SUFFIX}.jsonl")


def aggregate_metrics_path(output: Path) -> Path:
    return output.with_name(f"{output.stem}{AGGREGATE_SUFFIX}.json")


def lock_path(output: Path) -> Path:
    return output.with_name(f".{output.name}.lock")


def unsafe_path(output: Path) -> Path:
    return output.with_name(f"{UNSAFE_PREFIX}{output.name}")


# NeMo Gym's rollout health report beside a merged output (gym.rollout_health): one row a rollout, keyed like one.
ROLLOUT_VERDICTS = "rollout_verdicts.jsonl"


def is_auxiliary_jsonl(path: Path) -> bool:
    """A sidecar, a materialized-inputs file or a health report: never a shard of results."""
    return path.stem.endswith((FAILURES_SUFFIX, MATERIALIZED_INPUTS_SUFFIX)) or path.name == ROLLOUT_VERDICTS


@dataclass(frozen=True)
class RunFiles:
    output: Path
    sidecar: Path
    metrics: Path

    @classmethod
    def for_output(cls, output: Path, *, unsafe: bool = False) -> RunFiles:
        target = unsafe_path(output) if unsafe else output
        return cls(target, sidecar_path(target), aggregate_metrics_path(target))
