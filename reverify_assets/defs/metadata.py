"""The metadata a person reads in the Dagster UI for each materialization."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg

from reverify_assets.metrics.coverage import (
    COVERAGE_FIELD,
    PROVENANCE_BLOCK_FIELD,
    UNKNOWN,
    describe,
    total_coverage,
)
from reverify_assets.pipeline.output_summary import OutputSummary
from reverify_assets.pipeline.verification import VerificationResult
from reverify_assets.pipeline.verify_loop import VerifyStats


def verification_metadata(
    output: Path, result: VerificationResult, config_hash: str, whole: OutputSummary | None
) -> dict[str, Any]:
    stats = result.stats
    metadata: dict[str, Any] = {
        "file": dg.MetadataValue.path(str(output)),
        "rows": whole.rows if whole else stats.to_output,
        "rows written": stats.to_output,
        "rows verified": stats.verified,
        "rows already settled": result.skipped,
        "failures": stats.to_sidecar,
        "failures by class": dg.MetadataValue.json(dict(stats.failures_by_class)),
        "not persisted": stats.not_persisted,
        "verifier config hash": config_hash,
        "reverify modes": dg.MetadataValue.json(result.reverify_modes),
        "rows/s": round(stats.rows_per_second, 1),
    }
    mean = whole.mean_reward if whole else stats.mean_reward
    if mean is not None:
        metadata["mean reward"] = dg.MetadataValue.float(mean)
    if whole is not None:
        metadata["rows by verifier config"] = dg.MetadataValue.json(dict(whole.rows_by_config))
    if result.unsafe:
        metadata["unsafe"] = dg.MetadataValue.bool(True)
    return metadata


def sidecar_metadata(sidecar: Path, stats: VerifyStats, config_hash: str) -> dict[str, Any]:
    return {
        "file": dg.MetadataValue.path(str(sidecar)),
        "rows written": stats.to_sidecar,
        "failures by class": dg.MetadataValue.json(dict(stats.failures_by_class)),
        "verifier config hash": config_hash,
    }


def key_metrics_table(entries: list[dict[str, Any]]) -> str:
    lines = ["| agent | metric | value |", "| --- | --- | --- |"]
    for entry in entries:
        name = entry["agent_ref"]["name"]
        for metric, value in entry.get("key_metrics", {}).items():
            shown = f"{value:.4f}" if isinstance(value, float) else str(value)
            lines.append(f"| {name} | {metric} | {shown} |")
    return "\n".join(lines)


def coverage_table(entries: list[dict[str, Any]]) -> str:
    """Per entry: what its metrics cover and how far the rows they lack could move its mean reward."""
    lines = [
        "| agent | scored | failed by class | missing | mean reward | bounds (lost rows as 0 / 1) |",
        "| --- | ---: | --- | ---: | ---: | --- |",
    ]
    for entry in entries:
        block = entry.get(COVERAGE_FIELD) or {}
        failed = ", ".join(f"{count} {name}" for name, count in (block.get("failed_by_class") or {}).items())
        mean, lower, upper = block.get("mean_reward"), block.get("mean_reward_lower"), block.get("mean_reward_upper")
        lines.append(
            f"| {entry['agent_ref']['name']} | {block.get('scored', 0)} of {block.get('expected', UNKNOWN)} "
            f"| {failed or 'none'} | {block.get('missing', UNKNOWN)} | {_number(mean)} "
            f"| {_number(lower)} to {_number(upper)} |"
        )
    return "\n".join(lines)


def _number(value: Any) -> str:
    return f"{value:.4f}" if isinstance(value, int | float) else "n/a"


def aggregate_metadata(path: Path, entries: list[dict[str, Any]], config_hash: str) -> dict[str, Any]:
    total = total_coverage(entry[COVERAGE_FIELD] for entry in entries if COVERAGE_FIELD in entry)
    configs: dict[str, int] = {}
    for entry in entries:
        for config, rows in (entry.get(PROVENANCE_BLOCK_FIELD) or {}).get("rows_by_config", {}).items():
            configs[config] = configs.get(config, 0) + rows
    metadata: dict[str, Any] = {
        "file": dg.MetadataValue.path(str(path)),
        "agents": len(entries),
        "key metrics": dg.MetadataValue.md(key_metrics_table(entries)),
        "coverage": dg.MetadataValue.md(coverage_table(entries)),
        "metrics cover": describe(total),
        "complete": dg.MetadataValue.bool(total.complete),
        "rows by verifier config": dg.MetadataValue.json(configs),
        "verifier config hash": config_hash,
    }
    if len(entries) == 1:
        for metric, value in entries[0].get("key_metrics", {}).items():
            if isinstance(value, int | float):
                metadata[metric] = dg.MetadataValue.float(float(value))
    return metadata
