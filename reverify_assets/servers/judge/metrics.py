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
from reverify_assets.metrics.hooks import StreamingHook

ISSUE_RATE = "judgement_parsing_issue_rate"


class IssueRates:
    """The issue rates, one task at a time (a :class:`~reverify_assets.metrics.hooks.TaskReducer`)."""

    def __init__(self) -> None:
        self._judged = 0
        self._with_issues = 0
        self._kinds: Counter[str] = Counter()

    def add_task(self, rollouts: Sequence[Mapping[str, Any]]) -> None:
        for rollout in rollouts:
            evaluations = rollout.get("judge_evaluations")
            if not isinstance(evaluations, Sequence) or not evaluations:
                continue
            issues: set[str] = set()
            for evaluation in evaluations:
                if isinstance(evaluation, Mapping):
                    found = evaluation.get("judgement_parsing_issues") or ()
                    issues.update(issue for issue in found if isinstance(issue, str))
            self._judged += 1
            self._with_issues += bool(issues)
            self._kinds.update(issues)

    def finish(self) -> dict[str, Any]:
        if not self._judged:
            return {}
        metrics: dict[str, Any] = {ISSUE_RATE: self._with_issues / self._judged}
        for kind, count in sorted(self._kinds.items()):
            metrics[f"{ISSUE_RATE}/{kind}"] = count / self._judged
        return metrics


compute_metrics = StreamingHook(IssueRates, "The issue rates of the rollouts, by task (list form or streamed).")


def get_key_metrics(agent_metrics: Mapping[str, Any]) -> dict[str, Any]:
    key = default_key_metrics(agent_metrics)
    if ISSUE_RATE in agent_metrics:
        key[ISSUE_RATE] = agent_metrics[ISSUE_RATE]
    return key
