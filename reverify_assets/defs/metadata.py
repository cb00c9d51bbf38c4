"""The metadata a person reads in the Dagster UI for each materialization."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg

from reverify_assets.pipeline.verify_loop import VerifyStats


def verification_metadata(
    output: Path, stats: VerifyStats, config_hash: str, modes: dict[str, str], unsafe: bool
) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "file": dg.MetadataValue.path(str(output)),
        "rows": stats.to_output,
        "rows verified": stats.verified,
        "failures": stats.to_sidecar,
        "failures by class": dg.MetadataValue.json(dict(stats.failures_by_class)),
        "not persisted": stats.not_persisted,
        "verifier config hash": config_hash,
        "reverify modes": dg.MetadataValue.json(modes),
        "rows/s": round(stats.rows_per_second, 1),
    }
    if stats.mean_reward is not None:
        metadata["mean reward"] = dg.MetadataValue.float(stats.mean_reward)
    if unsafe:
        metadata["unsafe"] = dg.MetadataValue.bool(True)
    return metadata


def key_metrics_table(entries: list[dict[str, Any]]) -> str:
    lines = ["| agent | metric | value |", "| --- | --- | --- |"]
    for entry in entries:
        name = entry["agent_ref"]["name"]
        for metric, value in entry.get("key_metrics", {}).items():
            shown = f"{value:.4f}" if isinstance(value, float) else str(value)
            lines.append(f"| {name} | {metric} | {shown} |")
    return "\n".join(lines)


def aggregate_metadata(path: Path, entries: list[dict[str, Any]], config_hash: str) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "file": dg.MetadataValue.path(str(path)),
        "agents": len(entries),
        "key metrics": dg.MetadataValue.md(key_metrics_table(entries)),
        "verifier config hash": config_hash,
    }
    if len(entries) == 1:
        for metric, value in entries[0].get("key_metrics", {}).items():
            if isinstance(value, int | float):
                metadata[metric] = dg.MetadataValue.float(float(value))
    return metadata
