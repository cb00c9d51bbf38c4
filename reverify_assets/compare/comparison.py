"""``reverify compare`` as one function: two files in, the report out (and the flips file written)."""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict

from reverify_assets.compare.bootstrap import BootstrapSettings, task_mean_deltas
from reverify_assets.compare.breakdown import AGENT_FIELD, FieldGrouping
from reverify_assets.compare.figures import paired_figures
from reverify_assets.compare.flips import FlipsFile
from reverify_assets.compare.key_coverage import count_coverage, read_failures
from reverify_assets.compare.key_metrics import HookChoice, SideKeyMetrics, compare_key_metrics
from reverify_assets.compare.paired_rows import join_keys, paired_rows, refuse_other_rollouts
from reverify_assets.compare.provenance import config_warnings
from reverify_assets.compare.report import CompareReport, FlipsSummary, SideSummary
from reverify_assets.compare.side_index import index_side
from reverify_assets.compare.tally import PairTally


class CompareRequest(BaseModel):
    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    baseline: Path
    candidate: Path
    bootstrap: BootstrapSettings
    by: list[str] = []  # row fields (dotted paths) to break the figures down by, besides the agent
    hooks: HookChoice = HookChoice(None)
    allow_mixed_configs: bool = False
    allow_prompt_mismatch: bool = False  # else two outputs of different rollouts are refused
    flips: Path | None = None


@dataclass(frozen=True)
class Comparison:
    report: CompareReport
    task_deltas: np.ndarray  # each compared task's mean reward change (candidate − baseline), in task order


def run_comparison(request: CompareRequest) -> CompareReport:
    """Bad input (either side or a sidecar) and a side of mixed verifier configs fail before any row is
    compared or any file written."""
    return compare_scorings(request).report


def compare_scorings(request: CompareRequest) -> Comparison:
    """:func:`run_comparison`, with the per-task changes the report summarises (for a plot of their spread)."""
    baseline, candidate = index_side(request.baseline), index_side(request.candidate)
    warnings = config_warnings(
        {"baseline": (baseline.path, baseline.configs), "candidate": (candidate.path, candidate.configs)},
        allow_mixed=request.allow_mixed_configs,
    )
    failures = read_failures(baseline.path), read_failures(candidate.path)
    joined = join_keys(baseline.keys, candidate.keys)
    if not request.allow_prompt_mismatch:
        refuse_other_rollouts(joined, baseline.path, candidate.path)
    groupings = [FieldGrouping(field) for field in dict.fromkeys([AGENT_FIELD, *request.by])]
    metrics = SideKeyMetrics(baseline.path, request.hooks), SideKeyMetrics(candidate.path, request.hooks)
    with ExitStack() as stack:
        for side in metrics:
            stack.callback(side.close)
        flips = stack.enter_context(FlipsFile(request.flips)) if request.flips is not None else None
        tally = PairTally(groupings, metrics, flips)
        for pair in paired_rows(joined, baseline.keys, candidate.keys):
            tally.add(pair)
        key_metrics = compare_key_metrics(*metrics, agents_in_order=groupings[0].labels())
    rewards_before, rewards_after, tasks = tally.columns.arrays()
    report = CompareReport(
        baseline=SideSummary(path=str(baseline.path), configs=dict(baseline.configs.most_common())),
        candidate=SideSummary(path=str(candidate.path), configs=dict(candidate.configs.most_common())),
        warnings=warnings,
        coverage=count_coverage(joined, failures, tally.masked),
        overall=paired_figures(rewards_before, rewards_after, tasks, request.bootstrap),
        key_metrics=key_metrics,
        breakdowns=[
            grouping.breakdown(rewards_before, rewards_after, tasks, request.bootstrap) for grouping in groupings
        ],
        flips=None if flips is None else FlipsSummary(path=str(flips.path), rows=flips.rows),
    )
    return Comparison(report, task_mean_deltas(rewards_after - rewards_before, tasks))
