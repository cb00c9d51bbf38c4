"""NeMo Gym's ``judge_failsafe`` row: what ``/verify`` answers (HTTP 200) when the judge could not be called.

A failed judge *call* is a distinct outcome, not a wrong answer: the row carries the request as it came
(so recovery can grade the saved answer again), a masked zero reward, and ``_ng_failure_class:
"judge_failed"``, which sends it to the failures sidecar. It is never terminal: ``--resume`` and
``--judge-failed-only`` retry it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

JUDGE_FAILED = "judge_failed"
MAX_JUDGE_ERROR_CHARS = 2000

# NeMo Gym dumps its pydantic request model: the equivalence judge's declared optional fields appear
# (as null) even when the row lacks them, and the excluded `_ng_rollout_id` alias does not.
_DECLARED_REQUEST_DEFAULTS: dict[str, Any] = {"uuid": None, "expected_answer": None, "options": None, "metadata": None}
_EXCLUDED_REQUEST_FIELDS = ("_ng_rollout_id",)


class JudgeCallFailed(Exception):
    """The judge call failed for good (after retries where retrying could help); ``str()`` is the reason."""


def judge_failed_row(body: Mapping[str, Any], reason: str) -> dict[str, Any]:
    row: dict[str, Any] = dict(body)
    for field, default in _DECLARED_REQUEST_DEFAULTS.items():
        row.setdefault(field, default)
    for field in _EXCLUDED_REQUEST_FIELDS:
        row.pop(field, None)
    # A judge outage is transient: whatever the body says, this row must stay retryable on resume.
    row.pop("_ng_failure_terminal", None)
    row.update(
        {
            "reward": 0.0,
            "mask_sample": True,
            "failure_kind": JUDGE_FAILED,
            "failure_reason": reason,
            "instance_config": {"mask_sample": True},
            "_ng_failure_class": JUDGE_FAILED,
            "_ng_failure_judge_error": reason[:MAX_JUDGE_ERROR_CHARS],
        }
    )
    return row
