"""The metadata a person reads in the Dagster UI for each materialization."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import dagster as dg

from reverify_assets.compare.stored_flips import StoredRewardFlips
from reverify_assets.metrics.coverage import (
    COVERAGE_FIELD,
    PROVENANCE_BLOCK_FIELD,
    UNKNOWN,
    describe,
    total_coverage,
)
from reverify_assets.probe.report import ProbeReport
from reverify_assets.run.metrics_step import Aggregation
from reverify_assets.run.output_summary import OutputSummary
from reverify_assets.run.verification import VerificationResult
from reverify_assets.run.verify_loop import VerifyStats


def figure(value: float, decimals: int = 4) -> dg.FloatMetadataValue:
    """A mean, rate or change as a person reads it: the UI shows every digit a float has."""
    return dg.MetadataValue.float(round(value, decimals))


def p_value(value: float) -> dg.FloatMetadataValue:
    """Three significant figures: a p-value's digits beyond them mean nothing."""
    return dg.MetadataValue.float(float(f"{value:.3g}"))


def verification_metadata(
    output: Path,
    result: VerificationResult,
    config_hash: str,
    whole: OutputSummary | None,
    flips: StoredRewardFlips | None = None,
) -> dict[str, Any]:
    """``flips``: the output against the rewards its rollouts stored (None: not counted, as for a recovery)."""
    stats = result.stats
    metadata: dict[str, Any] = {
        "file": dg.MetadataValue.path(str(output)),
        "rows": whole.rows if whole else stats.to_output,
        "rows written": stats.to_output,
        "rows verified": stats.verified,
        "rows already settled": result.skipped,
        "failures": stats.to_sidecar,
        "failures by class": dg.MetadataValue.json(dict(stats.failures_by_class)),
        "first failure messages": dg.MetadataValue.json(stats.first_failure_messages),
        "not persisted": stats.not_persisted,
        "verifier config hash": config_hash,
        "reverify modes": dg.MetadataValue.json(result.reverify_modes),
        "requests": dg.MetadataValue.json(result.routes),
        "rows/s": round(stats.rows_per_second, 1),
    }
    metadata.update(judge_call_metadata(stats))
    if stats.stopped_by is not None:
        metadata["stopped by"] = stats.stopped_by
        metadata["rows left unsent"] = stats.rows_left
    mean = whole.mean_reward if whole else stats.mean_reward
    if mean is not None:
        metadata["mean reward"] = figure(mean)
    if whole is not None:
        metadata["rows by verifier config"] = dg.MetadataValue.json(dict(whole.rows_by_config))
    if flips is not None:
        metadata.update(stored_flips_metadata(flips))
    if result.unsafe:
        metadata["unsafe"] = dg.MetadataValue.bool(True)
    return metadata


def judge_call_metadata(stats: VerifyStats) -> dict[str, Any]:
    """The judge's verdicts on this run's rows, asked for and taken from the judge-call cache (none: no judge)."""
    if not (stats.judge_calls or stats.judge_cache_hits):
        return {}
    return {
        "judge calls": stats.judge_calls,
        "judge cache hits": stats.judge_cache_hits,
        "judge input tokens": stats.judge_input_tokens,
        "judge output tokens": stats.judge_output_tokens,
    }


def stored_flips_metadata(flips: StoredRewardFlips) -> dict[str, Any]:
    """The 2×2 table against the rewards stored in the original rollouts, and its figures as numbers (which the
    UI plots across materializations)."""
    metadata: dict[str, Any] = {
        "flips vs original": dg.MetadataValue.md(stored_flips_markdown(flips)),
        "rows compared with original": flips.compared,
    }
    if flips.mean_stored is not None and flips.mean_delta is not None:
        metadata["original mean reward"] = figure(flips.mean_stored)
        metadata["mean reward change"] = figure(flips.mean_delta)
    if flips.flip_rate is not None:
        metadata["pass→fail vs original"] = flips.pass_to_fail
        metadata["fail→pass vs original"] = flips.fail_to_pass
        metadata["flip rate vs original"] = figure(flips.flip_rate)
    return metadata


def stored_flips_markdown(flips: StoredRewardFlips) -> str:
    lines = [f"Against the rewards stored in the original rollouts, over {flips.compared:,} rows:", ""]
    if flips.flip_rate is not None:
        stored_pass, stored_fail = flips.both_pass + flips.pass_to_fail, flips.fail_to_pass + flips.both_fail
        lines += [
            "| original | now pass | now fail | total |",
            "| --- | ---: | ---: | ---: |",
            f"| pass | {flips.both_pass:,} | {flips.pass_to_fail:,} | {stored_pass:,} |",
            f"| fail | {flips.fail_to_pass:,} | {flips.both_fail:,} | {stored_fail:,} |",
            "",
            f"- flip rate {flips.flip_rate * 100:.1f} % ({flips.flips:,} rows): {flips.pass_to_fail:,} pass→fail, "
            f"{flips.fail_to_pass:,} fail→pass (net {flips.fail_to_pass - flips.pass_to_fail:+,})",
        ]
    elif flips.non_binary:
        lines.append(
            f"- no 2×2 table: {flips.non_binary:,} of the {flips.compared:,} rows have a reward other than 0 or 1 "
            "on one side; the mean change only"
        )
    if flips.mean_stored is not None and flips.mean_new is not None and flips.mean_delta is not None:
        lines.append(f"- mean reward {flips.mean_stored:.4f} → {flips.mean_new:.4f} (Δ {flips.mean_delta:+.4f})")
    if flips.unpaired:
        lines.append(f"- {flips.unpaired:,} rows left out: the original rollout stored no numeric reward")
    if flips.masked:
        lines.append(f"- {flips.masked:,} masked rows (`mask_sample`) left out")
    return "\n".join(lines)


def sidecar_metadata(sidecar: Path, stats: VerifyStats, config_hash: str) -> dict[str, Any]:
    return {
        "file": dg.MetadataValue.path(str(sidecar)),
        "rows written": stats.to_sidecar,
        "failures by class": dg.MetadataValue.json(dict(stats.failures_by_class)),
        "first failure messages": dg.MetadataValue.json(stats.first_failure_messages),
        "verifier config hash": config_hash,
    }


# The aggregate's tables are one small two-column table per agent, under its name: the Dagster UI's asset page at
# 1400 px leaves a metadata value about 400 px and never wraps a table cell, and a column per figure (or the
# agent's name on every row) ran past it.


def key_metrics_table(entries: list[dict[str, Any]]) -> str:
    return _per_agent(entries, "key metric", _key_metric_rows)


def coverage_table(entries: list[dict[str, Any]]) -> str:
    """Per entry: what its metrics cover and how far the rows they lack could move its mean reward."""
    return _per_agent(entries, "coverage", _coverage_rows)


def _key_metric_rows(entry: dict[str, Any]) -> list[tuple[str, str]]:
    return [(metric, _shown(value)) for metric, value in entry.get("key_metrics", {}).items()]


def _coverage_rows(entry: dict[str, Any]) -> list[tuple[str, str]]:
    block = entry.get(COVERAGE_FIELD) or {}
    # A row per failure class: one cell listing them all grew with their number.
    failed = [(f"failed: {name}", str(count)) for name, count in (block.get("failed_by_class") or {}).items()]
    return [
        ("scored", f"{block.get('scored', 0)} of {block.get('expected', UNKNOWN)}"),
        *(failed or [("failed", "none")]),
        ("missing", str(block.get("missing", UNKNOWN))),
        ("mean reward", _number(block.get("mean_reward"))),
        ("mean, lost rows as 0", _number(block.get("mean_reward_lower"))),
        ("mean, lost rows as 1", _number(block.get("mean_reward_upper"))),
    ]


def _per_agent(
    entries: list[dict[str, Any]], label: str, rows_of: Callable[[dict[str, Any]], list[tuple[str, str]]]
) -> str:
    """Each entry's rows as a ``label | value`` table under the agent's name."""
    blocks = []
    for entry in entries:
        rows = [f"| {name} | {value} |" for name, value in rows_of(entry)]
        table = "\n".join([f"| {label} | value |", "| --- | ---: |", *rows]) if rows else "none"
        blocks.append(f"**{entry['agent_ref']['name']}**\n\n{table}")
    return "\n\n".join(blocks) or "no agents"


def _shown(value: Any) -> str:
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def _number(value: Any) -> str:
    return f"{value:.4f}" if isinstance(value, int | float) else "n/a"


def aggregate_metadata(path: Path, aggregation: Aggregation, config_hash: str) -> dict[str, Any]:
    entries = aggregation.entries
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
        "metrics computed": dg.MetadataValue.json(aggregation.computed_by),
    }
    if len(entries) == 1:
        for metric, value in entries[0].get("key_metrics", {}).items():
            if isinstance(value, int | float):
                metadata[metric] = figure(float(value))
    return metadata


def probe_metadata(report: ProbeReport, kept: Path) -> dict[str, Any]:
    """A probe's verdict and figures, the agreement rates as numbers the UI plots across materializations."""
    metadata: dict[str, Any] = {
        "verdict": report.verdict,
        "report": dg.MetadataValue.path(str(kept)),
        "rows sampled": report.sampled_rows,
        "rows by agent": dg.MetadataValue.json(report.rows_by_agent),
        "reverify modes": dg.MetadataValue.json(report.reverify_modes),
        "separate server processes": dg.MetadataValue.bool(report.separate_processes),
    }
    for label, agreement in (("between passes", report.between_passes), ("with stored", report.with_stored)):
        if agreement.rate is not None:
            metadata[f"agreement {label}"] = figure(agreement.rate)
        if agreement.kappa is not None and agreement.kappa.value is not None:
            metadata[f"κ {label}"] = figure(agreement.kappa.value)
    return metadata
