"""``perf_summary``: efficiency statistics over the rollouts' ``ng_perf`` records (NeMo Gym's RFC R3 block).

Absent (None) when there is no rollout or no rollout carries an ``ng_perf`` dict. Reverify's stripped
verify responses normally carry none, so its answers have ``perf_summary: null``.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from reverify_assets.metrics.column_stats import quantile
from reverify_assets.metrics.summation import python_sum

TOKEN_FIELDS = ("prompt_tokens", "cached_prompt_tokens", "completion_tokens", "reasoning_tokens")

_STATS: dict[str, Callable[[Sequence[Any]], Any]] = {
    "mean": statistics.fmean,
    "median": statistics.median,
    "total": python_sum,
    "std": statistics.pstdev,
    "min": min,
    "max": max,
    "p50": lambda values: quantile(values, 0.5),
    "p90": lambda values: quantile(values, 0.9),
    "p99": lambda values: quantile(values, 0.99),
}
TOKEN_STATS = ("mean", "median", "total")
NUM_TURNS_STATS = ("mean", "median", "std", "min", "p90", "max")
LATENCY_STATS = ("p50", "p90", "p99", "mean")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float))  # bools count, as in NeMo Gym


class PerfRecords:
    """The ``ng_perf`` numbers the summary reads, collected record by record (nothing for rows without)."""

    def __init__(self) -> None:
        self.records = 0
        self._observed_tokens = 0
        self._values: dict[str, list[Any]] = {field: [] for field in (*TOKEN_FIELDS, "num_turns", "total_latency_ms")}
        self._per_turn: list[float] = []

    def add(self, record: Mapping[str, Any]) -> None:
        self.records += 1
        coverage = record.get("token_observability_coverage")
        if _is_number(coverage) and coverage > 0:
            self._observed_tokens += 1
        for field, values in self._values.items():
            value = record.get(field)
            if _is_number(value):
                values.append(value)
        completion, turns = record.get("completion_tokens"), record.get("num_turns")
        if _is_number(completion) and _is_number(turns) and turns > 0:
            self._per_turn.append(completion / turns)

    def summary(self, total_rollouts: int) -> dict[str, Any] | None:
        """The summary; `total_rollouts` counts every rollout, with or without a record."""
        if total_rollouts <= 0 or not self.records:
            return None
        summary: dict[str, Any] = {
            "overall_observability_coverage": self.records / total_rollouts,
            "token_observability_coverage": self._observed_tokens / total_rollouts,
        }
        for field in TOKEN_FIELDS:
            values = self._values[field]
            if values:
                summary.update({f"{stat}_{field}": _STATS[stat](values) for stat in TOKEN_STATS})
        turns = self._values["num_turns"]
        if turns:
            summary.update({f"{stat}_num_turns": _STATS[stat](turns) for stat in NUM_TURNS_STATS})
        if self._per_turn:
            summary["mean_tokens_per_turn"] = statistics.fmean(self._per_turn)
            summary["median_tokens_per_turn"] = statistics.median(self._per_turn)
        latencies = self._values["total_latency_ms"]
        if latencies:
            summary.update({f"total_latency_{stat}_ms": _STATS[stat](latencies) for stat in LATENCY_STATS})
        return summary
