"""The one reader of failures sidecars: each failed key once, with its last class, attempts and terminal flag."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from reverify_assets.errors import InputError
from reverify_assets.resume.failed_keys import UNKNOWN_CLASS, FailedKey, count_by_class, read_failed_keys
from tests.support.cli import write_jsonl


def attempt(task: int, rollout: int = 0, **fields: Any) -> dict[str, Any]:
    return {"_ng_task_index": task, "_ng_rollout_index": rollout, **fields}


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        ([], {}),
        ([attempt(1)], {(1, 0): FailedKey(UNKNOWN_CLASS, 1, False, None)}),
        ([attempt(1, _ng_failure_class=None)], {(1, 0): FailedKey(UNKNOWN_CLASS, 1, False, None)}),
        ([attempt(1, _ng_failure_class=5)], {(1, 0): FailedKey(UNKNOWN_CLASS, 1, False, None)}),
        ([attempt(1, _ng_failure_class={"x": 1})], {(1, 0): FailedKey(UNKNOWN_CLASS, 1, False, None)}),
        ([attempt(1, _ng_failure_class="")], {(1, 0): FailedKey(UNKNOWN_CLASS, 1, False, None)}),
        (
            # The class of the last attempt, however the earlier ones failed; attempts of one key add up.
            [
                attempt(1, _ng_failure_class="verify_failed"),
                attempt(2, _ng_failure_class="verify_failed"),
                attempt(1, _ng_failure_class="judge_failed"),
                attempt(1),
            ],
            {
                (1, 0): FailedKey(UNKNOWN_CLASS, 3, False, None),
                (2, 0): FailedKey("verify_failed", 1, False, None),
            },
        ),
        (
            [attempt(1, _ng_failure_class="verify_failed"), attempt(1, _ng_failure_class="judge_invalid")],
            {(1, 0): FailedKey("judge_invalid", 2, False, None)},
        ),
        (
            # Terminal when any attempt said so, truthy as NeMo Gym reads it; false says not.
            [
                attempt(1, _ng_failure_class="skipped", _ng_failure_terminal=True),
                attempt(1, _ng_failure_class="verify_failed"),
                attempt(2, _ng_failure_terminal=False),
                attempt(3, 1, _ng_failure_terminal=1),
            ],
            {
                (1, 0): FailedKey("verify_failed", 2, True, None),
                (2, 0): FailedKey(UNKNOWN_CLASS, 1, False, None),
                (3, 1): FailedKey(UNKNOWN_CLASS, 1, True, None),
            },
        ),
    ],
    ids=[
        "empty file",
        "missing class",
        "null class",
        "number class",
        "object class",
        "empty class",
        "later attempt changes the class",
        "two classes",
        "terminal flag",
    ],
)
def test_each_failed_key_once(tmp_path: Path, rows: list[dict[str, Any]], expected: dict) -> None:
    failed = read_failed_keys(write_jsonl(tmp_path / "o_failures.jsonl", rows))
    assert failed == expected
    assert list(failed) == list(expected), "in order of first appearance"


def test_an_absent_sidecar_has_no_failures(tmp_path: Path) -> None:
    assert read_failed_keys(tmp_path / "none_failures.jsonl") == {}


def test_the_note_and_class_come_from_the_last_row_across_files(tmp_path: Path) -> None:
    first = write_jsonl(tmp_path / "a_failures.jsonl", [attempt(1, _ng_failure_class="verify_failed", agent="x")])
    second = write_jsonl(tmp_path / "b_failures.jsonl", [attempt(1, _ng_failure_class="judge_failed", agent="y")])
    failed = read_failed_keys(first, tmp_path / "none_failures.jsonl", second, note=lambda row: row.get("agent"))
    assert failed == {(1, 0): FailedKey("judge_failed", 2, False, "y")}


def test_keys_count_once_by_their_last_class() -> None:
    failed = [FailedKey("judge_failed", 3, False, None), FailedKey(UNKNOWN_CLASS, 1, False, None)]
    assert count_by_class([*failed, FailedKey("judge_failed", 1, True, None)]) == {"judge_failed": 2, "unknown": 1}


@pytest.mark.parametrize(
    ("lines", "line"),
    [
        ([b'{"_ng_task_index": 1, "_ng_rollout_index": 0}', b'{"_ng_task_index": 2, '], 2),
        ([b'{"_ng_task_index": 1, "_ng_rollout_index": 0}', b""], 2),
        ([b"[1, 2]"], 1),
        ([b'{"_ng_rollout_index": 0, "_ng_failure_class": "x"}'], 1),
        ([b'{"_ng_task_index": 1, "_ng_rollout_index": "0"}'], 1),
    ],
    ids=["cut line", "blank line", "not an object", "no task index", "string rollout index"],
)
def test_a_bad_row_names_the_file_and_line(tmp_path: Path, lines: list[bytes], line: int) -> None:
    sidecar = tmp_path / "o_failures.jsonl"
    sidecar.write_bytes(b"\n".join(lines) + b"\n")
    with pytest.raises(InputError) as caught:
        read_failed_keys(sidecar)
    assert (caught.value.path, caught.value.line, caught.value.key) == (sidecar, line, None)


def test_sidecar_rows_are_read_as_written(tmp_path: Path) -> None:
    row = attempt(7, 2, _ng_failure_class="judge_failed", _ng_failure_terminal=True)
    sidecar = tmp_path / "o_failures.jsonl"
    sidecar.write_bytes(orjson.dumps(row))  # a last line without its line break
    assert read_failed_keys(sidecar) == {(7, 2): FailedKey("judge_failed", 1, True, None)}
