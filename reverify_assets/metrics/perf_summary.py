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


def compute_perf_summary(records: Sequence[Mapping[str, Any]], total_rollouts: int) -> dict[str, Any] | None:
    """Summary of `records` (the ``ng_perf`` dicts); `total_rollouts` counts every rollout, with or
    without one."""
    if total_rollouts <= 0 or not records:
        return None

    def values_of(field: str) -> list[Any]:
        return [record[field] for record in records if _is_number(record.get(field))]

    observed_tokens = sum(
        1
        for record in records
        if _is_number(record.get("token_observability_coverage")) and record["token_observability_coverage"] > 0
    )
    summary: dict[str, Any] = {
        "overall_observability_coverage": len(records) / total_rollouts,
        "token_observability_coverage": observed_tokens / total_rollouts,
    }
    for field in TOKEN_FIELDS:
        values = values_of(field)
        if values:
            summary.update({f"{stat}_{field}": _STATS[stat](values) for stat in TOKEN_STATS})
    turns = values_of("num_turns")
    if turns:
        summary.update({f"{stat}_num_turns": _STATS[stat](turns) for stat in NUM_TURNS_STATS})
    per_turn = [
        record["completion_tokens"] / record["num_turns"]
        for record in records
        if _is_number(record.get("completion_tokens"))
        and _is_number(record.get("num_turns"))
        and record["num_turns"] > 0
    ]
    if per_turn:
        summary["mean_tokens_per_turn"] = statistics.fmean(per_turn)
        summary["median_tokens_per_turn"] = statistics.median(per_turn)
    latencies = values_of("total_latency_ms")
    if latencies:
        summary.update({f"total_latency_{stat}_ms": _STATS[stat](latencies) for stat in LATENCY_STATS})
    return summary
