"""Our mcqa grading against what NeMo Gym 0.7.0 answered for the same 180 rollouts.

The data under tests/data/conformance/mcqa/ is a copy of the shared conformance set (see its README.md):
every `(_ng_task_index, _ng_rollout_index)` row must get NeMo Gym's reward and extracted answer under each
server grading mode, and under no server mode (`row_default`, the row's own `grading_mode`).
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from reverify_assets.servers.mcqa.grading import (
    Grade,
    effective_mode,
    grade,
    output_text,
    template_metadata_kwargs,
)

DATA_DIR = Path(__file__).resolve().parents[1] / "data" / "conformance" / "mcqa"
ROW_DEFAULT = "row_default"
COLUMNS = (
    ROW_DEFAULT,
    "strict_single_letter_boxed",
    "lenient_boxed",
    "lenient_answer_colon",
    "lenient_answer_colon_md",
)
EXPECTED_ROWS = 180

Key = tuple[int, int]


def _read_jsonl(name: str) -> list[dict[str, Any]]:
    with (DATA_DIR / name).open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _by_key(rows: list[dict[str, Any]], name: str) -> dict[Key, dict[str, Any]]:
    keyed: dict[Key, dict[str, Any]] = {}
    for row in rows:
        key = (row["_ng_task_index"], row["_ng_rollout_index"])
        assert key not in keyed, f"{name}: duplicate key {key}"
        keyed[key] = row
    return keyed


@cache
def _inputs() -> dict[Key, dict[str, Any]]:
    return _by_key(_read_jsonl("rollouts_materialized_inputs.jsonl"), "inputs")


@cache
def _rollouts() -> dict[Key, dict[str, Any]]:
    return _by_key(_read_jsonl("rollouts.jsonl"), "rollouts")


@cache
def _expected() -> dict[Key, dict[str, Any]]:
    return _by_key(_read_jsonl("expected_by_mode.jsonl"), "expected")


def _our_grade(key: Key, column: str) -> Grade:
    row = _inputs()[key]
    server_mode = None if column == ROW_DEFAULT else column
    return grade(
        response=_rollouts()[key]["response"],
        options=row.get("options"),
        expected_answer=row.get("expected_answer"),
        mode=effective_mode(server_mode, row.get("grading_mode")),
        **template_metadata_kwargs(row.get("template_metadata")),
    )


def _snippet(key: Key) -> str:
    text = output_text(_rollouts()[key]["response"])
    return repr(text if len(text) <= 120 else "…" + text[-120:])


def test_conformance_files_join_one_to_one() -> None:
    inputs, rollouts, expected = _inputs(), _rollouts(), _expected()
    assert len(rollouts) == EXPECTED_ROWS
    assert set(rollouts) == set(inputs) == set(expected)
    for key, row in expected.items():
        assert set(COLUMNS) <= set(row), f"{key}: expected_by_mode.jsonl lacks a column"


@pytest.mark.parametrize("column", COLUMNS)
def test_rewards_and_extracted_answers_match_nemo_gym(column: str) -> None:
    mismatches: list[str] = []
    for key in sorted(_expected()):
        want = _expected()[key][column]
        got = _our_grade(key, column)
        if (got.reward, got.extracted_answer) != (want["reward"], want["extracted_answer"]):
            mismatches.append(
                f"  {key}: ours reward={got.reward} extracted={got.extracted_answer!r}, "
                f"NeMo Gym reward={want['reward']} extracted={want['extracted_answer']!r}; "
                f"gold={got.expected_answer!r} text={_snippet(key)}"
            )
    assert not mismatches, f"{column}: {len(mismatches)} of {len(_expected())} rows differ:\n" + "\n".join(mismatches)


@pytest.mark.parametrize("column", COLUMNS)
def test_mean_reward_and_no_answer_rate_match_nemo_gym_metrics(column: str) -> None:
    # Ties the row answers to the aggregate files NeMo Gym wrote in the same runs.
    (entry,) = json.loads((DATA_DIR / f"expected_aggregate_metrics_{column}.json").read_text("utf-8"))
    grades = [_our_grade(key, column) for key in sorted(_expected())]
    mean_reward = sum(g.reward for g in grades) / len(grades)
    no_answer_pct = 100.0 * sum(g.extracted_answer is None for g in grades) / len(grades)
    key_metrics = entry["key_metrics"]
    (avg_no_answer_key,) = [k for k in key_metrics if k.startswith("pass@1[avg-of-") and k.endswith("/no_answer")]
    assert mean_reward == pytest.approx(key_metrics["mean/reward"])
    assert no_answer_pct == pytest.approx(key_metrics[avg_no_answer_key])
