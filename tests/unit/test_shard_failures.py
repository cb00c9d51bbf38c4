"""A shard's failure metadata: "failures" and "failures by class" count the same keys."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reverify_assets.rescoring.shard_gate import unresolved_failures
from reverify_assets.resume.failed_keys import UNKNOWN_CLASS
from tests.support.cli import write_jsonl


def attempt(task: int, rollout: int = 0, **fields: Any) -> dict[str, Any]:
    return {"_ng_task_index": task, "_ng_rollout_index": rollout, **fields}


def test_shard_failures_by_class_count_the_keys_no_later_attempt_scored(tmp_path: Path) -> None:
    """The shard metadata's "failures" and "failures by class": keys, each under its last class, the same total."""
    output = write_jsonl(tmp_path / "s.jsonl", [attempt(3, reward=1.0)])
    write_jsonl(
        tmp_path / "s_failures.jsonl",
        [
            attempt(1, _ng_failure_class="verify_failed"),
            attempt(1),  # three attempts, the last without a class: one key, unknown
            attempt(1, _ng_failure_class=None),
            attempt(2, _ng_failure_class="judge_failed"),
            attempt(2, _ng_failure_class="judge_failed"),
            attempt(3, _ng_failure_class="verify_failed"),  # scored by a later attempt: not a failure
        ],
    )
    by_class = unresolved_failures(output)
    assert by_class == {UNKNOWN_CLASS: 1, "judge_failed": 1}
    assert by_class.total() == 2


def test_a_shard_without_a_sidecar_has_no_failures(tmp_path: Path) -> None:
    output = write_jsonl(tmp_path / "s.jsonl", [attempt(3, reward=1.0)])
    assert unresolved_failures(output) == {}
