"""A verify step's output as a whole: what a run that added to an existing file reports, besides its own rows."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from reverify_assets.compare.stored_flips import StoredRewardFlips
from reverify_assets.run.output_flips import tally_output_flips
from reverify_assets.run.output_summary import OutputSummary, summarize_output
from reverify_assets.run.verification import VerificationResult, VerifyStep


@dataclass(frozen=True)
class WholeOutput:
    summary: OutputSummary | None  # None: this run wrote the whole file, and its stats say what it holds
    flips: StoredRewardFlips | None  # against the rewards the rollouts stored; None when not asked for

    def rows(self, result: VerificationResult) -> int:
        return self.summary.rows if self.summary else result.stats.to_output

    def mean_reward(self, result: VerificationResult) -> float | None:
        return self.summary.mean_reward if self.summary else result.stats.mean_reward


def whole_output(
    result: VerificationResult, plan: pl.DataFrame, step: VerifyStep, *, against_stored: bool
) -> WholeOutput:
    """``against_stored``: count the output's flips against the rewards its rollouts stored. The verify loop
    counted its own rows; rows an earlier attempt wrote are read again, in one pass for both figures."""
    flips = result.stats.stored_flips if against_stored else None
    if against_stored and result.skipped:
        summary = OutputSummary()
        return WholeOutput(summary, tally_output_flips(result.files.output, plan, step.responses, summary))
    if result.skipped or not step.policy.is_fresh:
        return WholeOutput(summarize_output(result.files.output), flips)
    return WholeOutput(None, flips)
