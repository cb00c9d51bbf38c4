"""The asset checks a Dagster user reads, each recorded against the partition it judges.

Every asset we check is partitioned (by shard × verifier config, by verifier config, or by output file), and so is
every check: its Partitions tab shows one result per shard, config or output, the asset's partition page shows
its checks, and a verifier edit leaves the old config's verdict on the old config's partition instead of beside
the new one's missing shards.

| check | on | blocking | fails when |
| --- | --- | --- | --- |
| ``join_complete`` | a shard's payloads | yes | a rollout has no materialized input row |
| ``no_duplicate_keys`` | a shard's payloads | yes | a (task, rollout) key appears twice |
| ``failure_rate_within_limit`` | a shard's rows | yes | more of them failed than the rescoring allows |
| ``one_verifier_config`` | a rescoring's aggregate | no | a merged row was scored by another config |
| ``one_verifier_config`` | a recovery's merged rows | no (WARN) | the merged rows come from several configs |
| ``stateless_evidence`` | a rescoring's probe | no (WARN) | two passes of the probe disagree |
| ``rollout_health`` | an aggregate | no (WARN) | NeMo Gym's rollout health checks find an unhealthy one |

``rollout_health`` (on a rescoring's aggregate and ``reverify aggregate``'s) also warns when NeMo Gym's checks
fail; when they did not run (turned off, or no NeMo Gym to run them) it passes, its description saying why.
"""

from __future__ import annotations

import warnings

import dagster as dg

from reverify_assets.gym.rollout_health import HealthOutcome
from reverify_assets.probe.report import CONSISTENT, DRIFTED, ProbeReport
from reverify_assets.run.output_summary import OutputSummary

JOIN_COMPLETE = "join_complete"
NO_DUPLICATE_KEYS = "no_duplicate_keys"
FAILURE_RATE = "failure_rate_within_limit"
ONE_CONFIG = "one_verifier_config"
STATELESS_EVIDENCE = "stateless_evidence"
ROLLOUT_HEALTH = "rollout_health"
ROLLOUT_HEALTH_DESCRIPTION = (
    "NeMo Gym's rollout health checks of the merged rows, as gym eval aggregate runs them, find every rollout "
    "healthy (else a warning; when they did not run, it passes and says why)"
)
TOP_FINDINGS = 5


def check_spec(
    name: str,
    asset: dg.AssetKey | str,
    description: str,
    partitions_def: dg.PartitionsDefinition,
    *,
    blocking: bool = False,
) -> dg.AssetCheckSpec:
    """A check on ``asset``'s partitions: its results are filed under the partition the step materialized."""
    with warnings.catch_warnings():  # partitioned checks are a preview of Dagster 1.13
        warnings.simplefilter("ignore", dg.PreviewWarning)
        return dg.AssetCheckSpec(
            name, asset=asset, blocking=blocking, description=description, partitions_def=partitions_def
        )


def one_config_result(summary: OutputSummary, current: str) -> dg.AssetCheckResult:
    """A rescoring's aggregate: fails, naming the configs, when a merged row was scored by another verifier config
    than the current."""
    others = {config: rows for config, rows in summary.rows_by_config.items() if config != current}
    if others:
        described = ", ".join(f"{rows} by {config}" for config, rows in sorted(others.items()))
        description = f"of {summary.rows} merged rows, {described}; the current verifier config is {current}"
    else:
        description = f"all {summary.rows} merged rows were scored by the current verifier config {current}"
    return dg.AssetCheckResult(
        check_name=ONE_CONFIG,
        passed=not others,
        description=description,
        metadata={
            "current verifier config": current,
            "rows by verifier config": dg.MetadataValue.json(dict(summary.rows_by_config)),
        },
    )


def merged_configs_result(summary: OutputSummary) -> dg.AssetCheckResult:
    """A judge recovery's merge: a warning when its rows were scored by several known configs (the successes it
    carried over keep the grader that scored them; rows of unknown provenance are reported, not judged)."""
    known = summary.known_configs
    return dg.AssetCheckResult(
        check_name=ONE_CONFIG,
        passed=len(known) <= 1,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={
            "rows by verifier config": dg.MetadataValue.json(dict(summary.rows_by_config)),
            "configs": len(known),
        },
        description=None if len(known) <= 1 else f"the merged rows were scored by {len(known)} configs: {known}",
    )


def stateless_evidence_result(report: ProbeReport) -> dg.AssetCheckResult:
    """A probe whose passes agree (whatever the stored rewards say) is evidence that re-scoring is sound."""
    return dg.AssetCheckResult(
        check_name=STATELESS_EVIDENCE,
        passed=report.verdict.startswith(CONSISTENT) or report.verdict.startswith(DRIFTED),
        severity=dg.AssetCheckSeverity.WARN,
        metadata={"verdict": report.verdict},
    )


def rollout_health_result(outcome: HealthOutcome | None) -> dg.AssetCheckResult:
    """NeMo Gym's rollout health checks of an aggregate's rows: the verdict counts and the checks that found the
    most; a warning when a rollout is unhealthy or the checks failed. Checks that did not run (turned off, or no
    NeMo Gym here) pass with a description saying so: Dagster has no result for "not run" that a step can give."""
    if outcome is None or outcome.health is None:
        why = "not run: turned off (--no-health-check, disable_health_check)" if outcome is None else outcome.lines[0]
        failed = outcome is not None and outcome.failure is not None
        return dg.AssetCheckResult(
            check_name=ROLLOUT_HEALTH,
            passed=not failed,
            severity=dg.AssetCheckSeverity.WARN,
            description=why,
            metadata={"checked": 0, "failed": failed},
        )
    health = outcome.health
    return dg.AssetCheckResult(
        check_name=ROLLOUT_HEALTH,
        passed=health.counts["unhealthy"] == 0,
        severity=dg.AssetCheckSeverity.WARN,
        description=outcome.lines[0],
        metadata={
            **health.counts,
            "top findings by check": dg.MetadataValue.json(health.findings_by_check(TOP_FINDINGS)),
            "ignored checks": dg.MetadataValue.json(health.run.get("ignored_checks") or []),
            "quality summary": dg.MetadataValue.path(str(health.summary)),
            "rollout verdicts": dg.MetadataValue.path(str(health.verdicts)),
        },
    )
