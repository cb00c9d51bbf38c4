"""What one shard's step and a rescoring's aggregate report to Dagster: materializations and check results."""

from collections.abc import Iterator
from typing import Any

import dagster as dg
import polars as pl

from reverify_assets.defs.checks import FAILURE_RATE, JOIN_COMPLETE, NO_DUPLICATE_KEYS
from reverify_assets.defs.handles import content_version
from reverify_assets.defs.metadata import figure, judge_call_metadata, sidecar_metadata, stored_flips_metadata
from reverify_assets.rescoring.shard_work import PlannedShard, VerifiedShard


def payload_events(key: dg.AssetKey, planned: PlannedShard) -> Iterator[Any]:
    plan, (first, end) = planned.plan, planned.tasks
    yield dg.MaterializeResult(
        asset_key=key,
        metadata={
            "rows": plan.plan.height,
            "rollouts in shard": plan.rollouts,
            "tasks": f"{first}..{end - 1}",
            "rollouts file": dg.MetadataValue.path(str(planned.rollouts)),
            "plan": dg.MetadataValue.path(str(planned.plan_file)),
        },
        data_version=content_version(planned.plan_file),
    )
    yield dg.AssetCheckResult(
        asset_key=key,
        check_name=JOIN_COMPLETE,
        passed=plan.is_complete,
        metadata={
            "shard": planned.shard,
            "rollouts without input": plan.missing_inputs.height,
            "first": _first_keys(plan.missing_inputs),
        },
    )
    yield dg.AssetCheckResult(
        asset_key=key,
        check_name=NO_DUPLICATE_KEYS,
        passed=not plan.has_duplicates,
        metadata={
            "shard": planned.shard,
            "duplicated keys": plan.duplicate_keys.height,
            "first": _first_keys(plan.duplicate_keys),
        },
    )


def join_problems(planned: PlannedShard) -> str:
    plan, problems = planned.plan, []
    if not plan.is_complete:
        problems.append(
            f"{JOIN_COMPLETE} failed: {plan.missing_inputs.height} rollouts without an input row "
            f"({_first_keys(plan.missing_inputs)})"
        )
    if plan.has_duplicates:
        problems.append(
            f"{NO_DUPLICATE_KEYS} failed: {plan.duplicate_keys.height} keys twice ({_first_keys(plan.duplicate_keys)})"
        )
    return "; ".join(problems)


def verified_events(
    rows_key: dg.AssetKey,
    failures_key: dg.AssetKey,
    shard: str,
    verified: VerifiedShard,
    config_hash: str,
    limit: float,
) -> Iterator[Any]:
    result = verified.result
    metadata: dict[str, Any] = {
        "file": dg.MetadataValue.path(str(result.files.output)),
        "rows": verified.rows,
        "failures": verified.failures,
        "failures by class": dg.MetadataValue.json(dict(verified.failures_by_class.most_common())),
        "first failure messages this run": dg.MetadataValue.json(result.stats.first_failure_messages),
        "rows verified this run": result.stats.verified,
        "verifier config hash": config_hash,
        "requests": dg.MetadataValue.json(result.routes),
        **judge_call_metadata(result.stats),
    }
    if (mean := verified.whole.mean_reward(result)) is not None:
        metadata["mean reward"] = figure(mean)
    if verified.whole.flips is not None:
        metadata.update(stored_flips_metadata(verified.whole.flips))
    yield dg.MaterializeResult(asset_key=rows_key, metadata=metadata, data_version=content_version(result.files.output))
    yield dg.MaterializeResult(
        asset_key=failures_key,
        metadata=sidecar_metadata(result.files.sidecar, result.stats, config_hash),
        data_version=content_version(result.files.sidecar),
    )
    yield dg.AssetCheckResult(
        asset_key=rows_key,
        check_name=FAILURE_RATE,
        passed=verified.failure_rate <= limit,
        metadata={
            "shard": shard,
            "failure rate": figure(verified.failure_rate),
            "limit": limit,
        },
    )


def _first_keys(keys: pl.DataFrame, limit: int = 5) -> str:
    return ", ".join(f"({t}, {r})" for t, r in keys.head(limit).iter_rows()) or "none"
