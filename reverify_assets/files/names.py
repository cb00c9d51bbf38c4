"""The names of a run's files: those written next to its output, as NeMo Gym names them, the shard files an
``--input-glob`` names (never a sidecar), and the output's Dagster partition key."""

from __future__ import annotations

import glob
from dataclasses import dataclass
from pathlib import Path

from reverify_assets.errors import OutputError

UNSAFE_PREFIX = "unsafe_"
FAILURES_SUFFIX = "_failures"
AGGREGATE_SUFFIX = "_aggregate_metrics"
MATERIALIZED_INPUTS_SUFFIX = "_materialized_inputs"


def sidecar_path(output: Path) -> Path:
    return output.with_name(f"{output.stem}{FAILURES_SUFFIX}.jsonl")


def source_failures_path(rollouts: Path) -> Path:
    """The failures of the run that wrote ``--rollouts``, which a judge recovery re-judges: NeMo Gym derives it
    from --rollouts; it is not configurable."""
    return sidecar_path(rollouts)


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


def expand_input_glob(patterns: str) -> list[Path]:
    """Each pattern's matches sorted; the first time a file is named wins its place; sidecars left out."""
    seen: dict[Path, None] = {}
    for pattern in (part.strip() for part in patterns.split(",")):
        if not pattern:
            continue
        for match in sorted(glob.glob(pattern)):
            path = Path(match)
            if path.is_file() and not is_auxiliary_jsonl(path):
                seen.setdefault(path, None)
    return list(seen)


REFUSED_IN_PARTITION_KEYS = ("...", "\a", "\b", "\f", "\n", "\r", "\t", "\v", "\0")


def output_partition_key(output: Path, flag: str = "--output") -> str:
    key = str(output.resolve())
    if refused := [part for part in REFUSED_IN_PARTITION_KEYS if part in key]:
        raise OutputError(
            f"{flag} {str(output)!r}: its path is the output's Dagster partition key, which cannot hold {refused}; "
            "choose a path without them",
            path=output,
        )
    return key
