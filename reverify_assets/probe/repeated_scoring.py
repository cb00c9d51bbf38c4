"""The same rows scored several times with one config: each time by servers started afresh, in another order.

What ``reverify noise`` measures a judge's self-agreement on. Every scoring is a whole verification of the sample
(``run_verification``, without Dagster), into files of its own in a work folder: a fresh fleet each time, so no
server process sees the rows twice, and after the first in a shuffled order, so a server whose answer depends on
what it saw before (state, a warm cache of its own) shows it. Without the judge-call cache: a cached verdict is
no new sample of the judge.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

from reverify_assets.files.jsonl import iter_jsonl
from reverify_assets.keys.key_index import KEY_COLUMNS
from reverify_assets.keys.rollout_keys import RolloutKey, row_key
from reverify_assets.resume.output_policy import OutputPolicy
from reverify_assets.rows.row_fields import is_masked, numeric_reward
from reverify_assets.run.preparation import VerifierSetup
from reverify_assets.run.verification import VerifyStep, run_verification


def sample_plan(plan: pl.DataFrame, size: int, seed: int, strata: str | None = None) -> pl.DataFrame:
    """``size`` rows of the join plan drawn without replacement (all of them when it has fewer), in key order; the
    same seed draws the same rows. With ``strata`` (a column), each of its values gets its share of the sample,
    and at least one row: a small agent is not left out."""
    if plan.height <= size:
        return plan.sort(KEY_COLUMNS)
    if strata is None:
        return plan.sample(n=size, seed=seed).sort(KEY_COLUMNS)
    groups = sorted(plan.partition_by(strata, as_dict=True).items(), key=lambda item: str(item[0]))
    parts = []
    for offset, (_, group) in enumerate(groups):
        share = max(1, round(size * group.height / plan.height))
        parts.append(group.sample(n=min(share, group.height), seed=seed + offset))
    return pl.concat(parts).sort(KEY_COLUMNS)


@dataclass(frozen=True)
class Scoring:
    rewards: dict[RolloutKey, float]  # the rows it scored, unmasked (a failed row is in its sidecar, not here)
    failed: int
    reverify_modes: dict[str, str]  # what each server declared


def score_repeatedly(
    setup: VerifierSetup,
    inputs: Path,
    rollouts: Path,
    sample: pl.DataFrame,
    *,
    repeats: int,
    work: Path,
    seed: int,
    concurrency: int,
    force: bool = False,
    skip_guard: bool = False,
) -> list[Scoring]:
    """``force``: score with servers that do not declare themselves stateless, warned about each time;
    ``skip_guard``: without asking (the probe, whose verdict is the evidence the guard lacks)."""
    scorings = []
    for repeat in range(repeats):
        order = sample if repeat == 0 else sample.sample(fraction=1.0, shuffle=True, seed=seed + repeat)
        step = VerifyStep(
            inputs=inputs,
            responses=rollouts,
            output=work / f"scoring_{repeat + 1}.jsonl",
            policy=OutputPolicy(overwrite=True),
            force=force,
            skip_guard=skip_guard,
            concurrency=concurrency,
        )
        result = run_verification(order, setup.without_judge_cache(), step)
        scorings.append(Scoring(_rewards(result.files.output), result.stats.to_sidecar, result.reverify_modes))
    return scorings


def _rewards(output: Path) -> dict[RolloutKey, float]:
    """The scored rows' rewards; a masked row (``mask_sample``) is no measurement, and is left out."""
    rewards = {}
    for entry in iter_jsonl(output):
        reward = numeric_reward(entry.row)
        if reward is not None and not is_masked(entry.row):
            rewards[row_key(entry.row, output, entry.line_no)] = reward
    return rewards
