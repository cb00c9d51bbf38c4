"""What an aggregate covers: the ``coverage`` and ``provenance`` blocks of each metrics entry (pure).

NeMo Gym's metrics are computed over the rows of the main output only; rows the verifier could not score
(the failures sidecar) and rows never scored at all are simply absent, so a run that lost rows looks like a
smaller, complete run. Each entry of our metrics file therefore carries, after NeMo Gym's own fields:

``coverage``
    ``expected`` rows (an integer, or ``"unknown"`` when the run's plan is not known), of which ``scored``
    (in the output), ``failed`` (in a sidecar and not scored later; ``failed_by_class`` by
    ``_ng_failure_class``) and ``missing`` (neither; ``"unknown"`` with the expected total);
    ``complete`` (every expected row scored, and the expected total known); ``mean_reward`` over the scored
    rows (every row of the output, masked ones too, as the CLI's "Mean reward"); and
    ``mean_reward_lower`` / ``mean_reward_upper``, the mean with every failed and missing row counted as 0
    and as 1 (NeMo Gym's ``++count_failure_classes_as_zero`` / ``++count_missing_rollouts_as_zero``
    give the lower one). For rewards in [0, 1] the true mean of the whole run lies between them. With an
    unknown expected total the bounds count the failed rows only.
``provenance``
    ``rows_by_config``: the scored rows of the entry by the verifier config hash that scored them
    (``reverify_provenance.config_hash``; ``"original"`` for rows without one, scored before reverify), and
    ``mixed``: whether that is more than one.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from reverify_assets.rows.result_routing import ORIGINAL_CONFIG

UNKNOWN = "unknown"
ORIGINAL = ORIGINAL_CONFIG
COVERAGE_FIELD = "coverage"
PROVENANCE_BLOCK_FIELD = "provenance"


@dataclass
class Coverage:
    """The counts of one entry (or of several, added together); ``missing`` None means unknown."""

    scored: int = 0
    reward_sum: float = 0.0
    failed_by_class: Counter[str] = field(default_factory=Counter)
    missing: int | None = 0

    @property
    def failed(self) -> int:
        return sum(self.failed_by_class.values())

    @property
    def lost(self) -> int:
        """Rows the metrics lack that are known to be lost: failed, plus missing when known."""
        return self.failed + (self.missing or 0)

    @property
    def expected(self) -> int | None:
        return None if self.missing is None else self.scored + self.failed + self.missing

    @property
    def complete(self) -> bool:
        return self.missing == 0 and self.failed == 0

    @property
    def mean_reward(self) -> float | None:
        return self.reward_sum / self.scored if self.scored else None

    @property
    def bounds(self) -> tuple[float, float] | None:
        """The mean with every lost row counted as 0, and as 1; None when no row is known at all."""
        rows = self.scored + self.lost
        if not rows:
            return None
        return self.reward_sum / rows, (self.reward_sum + self.lost) / rows

    def __add__(self, other: Coverage) -> Coverage:
        missing = None if self.missing is None or other.missing is None else self.missing + other.missing
        return Coverage(
            self.scored + other.scored,
            self.reward_sum + other.reward_sum,
            self.failed_by_class + other.failed_by_class,
            missing,
        )

    def block(self) -> dict[str, Any]:
        """The ``coverage`` block of a metrics entry (plain JSON: non-finite numbers are null)."""
        bounds = self.bounds
        lower, upper = bounds if bounds is not None else (None, None)
        return {
            "expected": _known(self.expected),
            "scored": self.scored,
            "failed": self.failed,
            "failed_by_class": dict(sorted(self.failed_by_class.items())),
            "missing": _known(self.missing),
            "complete": self.complete,
            "mean_reward": _finite(self.mean_reward),
            "mean_reward_lower": _finite(lower),
            "mean_reward_upper": _finite(upper),
        }

    @classmethod
    def from_block(cls, block: Mapping[str, Any]) -> Coverage:
        """Back from a block (a metrics file, a materialization's summary); the reward sum from the mean."""
        scored = int(block.get("scored") or 0)
        mean = block.get("mean_reward")
        missing = block.get("missing")
        failed = block.get("failed_by_class") or {}
        return cls(
            scored=scored,
            reward_sum=float(mean) * scored if isinstance(mean, int | float) else 0.0,
            failed_by_class=Counter({str(name): int(count) for name, count in failed.items()}),
            missing=missing if isinstance(missing, int) else None,
        )


def total_coverage(blocks: Iterable[Mapping[str, Any]]) -> Coverage:
    """The coverage of several entries together (a run's whole metrics file)."""
    total = Coverage()
    for block in blocks:
        total = total + Coverage.from_block(block)
    return total


def reward_value(row: Mapping[str, Any]) -> float:
    """A scored row's reward as the mean counts it: a number, else 0 (as the verify loop counts it)."""
    reward = row.get("reward")
    return float(reward) if isinstance(reward, int | float) else 0.0


def describe(coverage: Coverage) -> str:
    """``25 of 37 rollouts (12 judge_failed)``: what a one-line summary says after "Metrics cover"."""
    lost = [f"{count} {name}" for name, count in sorted(coverage.failed_by_class.items(), key=_most_first)]
    if coverage.missing:
        lost.append(f"{coverage.missing} missing")
    if coverage.expected is None:
        lost.append("expected total unknown")
        counted = f"{coverage.scored} rollouts"
    else:
        counted = f"{coverage.scored} of {coverage.expected} rollouts"
    return f"{counted} ({', '.join(lost)})" if lost else counted


def describe_bounds(coverage: Coverage) -> str | None:
    """How far the lost rows could move the mean, or None when nothing is lost (or nothing scored)."""
    mean, bounds = coverage.mean_reward, coverage.bounds
    if not coverage.lost or mean is None or bounds is None:
        return None
    rows = "row" if coverage.lost == 1 else "rows"
    return (
        f"mean reward {mean:.4f} over the scored rows; {bounds[0]:.4f} to {bounds[1]:.4f} "
        f"with the {coverage.lost} lost {rows} counted as 0 or as 1"
    )


def provenance_block(rows_by_config: Mapping[str, int]) -> dict[str, Any]:
    """The ``provenance`` block of a metrics entry: configs by row count, most rows first."""
    ordered = dict(sorted(rows_by_config.items(), key=_most_first))
    return {"rows_by_config": ordered, "mixed": len(ordered) > 1}


def mixed_configs_message(rows_by_config: Mapping[str, int], example_file: Mapping[str, str]) -> str | None:
    """None for rows of one config; else the refusal, naming each config with its rows and a file holding it.

    Rows without provenance (``"original"``) count as a config of their own: nothing shows they were scored
    by the same verifier as the others.
    """
    if len(rows_by_config) <= 1:
        return None
    return (
        f"the rows were scored by {len(rows_by_config)} different verifier configs: "
        f"{describe_configs(rows_by_config, example_file)}. Their metrics would mix graders: re-score them "
        "with one config, or pass --allow-mixed-configs to aggregate them anyway (each entry's `provenance` "
        "block then lists the configs)"
    )


def describe_configs(rows_by_config: Mapping[str, int], example_file: Mapping[str, str]) -> str:
    """``config 3f2a… (90 rows, e.g. out/shard0.jsonl); config 9bc1… (90 rows, e.g. out/shard1.jsonl)``."""
    return "; ".join(
        f"{_config_name(config)} ({count} rows, e.g. {example_file.get(config, '?')})"
        for config, count in sorted(rows_by_config.items(), key=_most_first)
    )


def _config_name(config: str) -> str:
    return "rows without reverify_provenance ('original')" if config == ORIGINAL else f"config {config}"


def _most_first(item: tuple[str, int]) -> tuple[int, str]:
    return -item[1], item[0]


def _known(value: int | None) -> int | str:
    return UNKNOWN if value is None else value


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None
