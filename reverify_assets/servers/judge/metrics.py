"""The equivalence judge's ``/aggregate_metrics`` hooks: NeMo Gym's judgement-parsing issue rate.

``judgement_parsing_issue_rate`` is the share of judged rollouts with at least one evaluation whose reply
was hard to read (no verdict, conflicting or repeated verdicts, truncated, no text); one
``judgement_parsing_issue_rate/<issue>`` per issue seen. Rollouts without evaluations (not judged) are left
out; a run with none gets no such metric. The rate is also a key metric.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from reverify_assets.metrics.aggregate import default_key_metrics

ISSUE_RATE = "judgement_parsing_issue_rate"


def compute_metrics(tasks: Sequence[Sequence[Mapping[str, Any]]]) -> dict[str, Any]:
    judged = 0
    with_issues = 0
    kinds: Counter[str] = Counter()
    for task in tasks:
        for rollout in task:
            evaluations = rollout.get("judge_evaluations")
            if not isinstance(evaluations, Sequence) or not evaluations:
                continue
            issues: set[str] = set()
            for evaluation in evaluations:
                if isinstance(evaluation, Mapping):
                    found = evaluation.get("judgement_parsing_issues") or ()
                    issues.update(issue for issue in found if isinstance(issue, str))
            judged += 1
            with_issues += bool(issues)
            kinds.update(issues)
    if not judged:
        return {}
    metrics: dict[str, Any] = {ISSUE_RATE: with_issues / judged}
    for kind, count in sorted(kinds.items()):
        metrics[f"{ISSUE_RATE}/{kind}"] = count / judged
    return metrics


def get_key_metrics(agent_metrics: Mapping[str, Any]) -> dict[str, Any]:
    key = default_key_metrics(agent_metrics)
    if ISSUE_RATE in agent_metrics:
        key[ISSUE_RATE] = agent_metrics[ISSUE_RATE]
    return key
