"""The synthetic free-form QA generator: determinism, join keys, the bundled sample and the stored judge verdicts."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest

from reverify_assets.local_judge.verdict_rule import equivalent, final_answer
from reverify_assets.servers.judge.config import EquivalenceJudgeConfig
from reverify_assets.servers.judge.prompt import last_assistant_text
from reverify_assets.synthetic import qa_rollouts
from reverify_assets.synthetic.nemo_gym_rows import completion_order
from reverify_assets.synthetic.qa_rollouts import (
    INPUTS_FILE_NAME,
    ROLLOUTS_FILE_NAME,
    QASpec,
    iter_rollout_rows,
    write_qa_dataset,
)

REPO = Path(__file__).resolve().parents[2]
SAMPLE_DIR = REPO / "samples/judge"
NO_ANSWER = EquivalenceJudgeConfig().msg_extraction_failure

Row = dict[str, Any]
Key = tuple[int, int]
Dataset = tuple[QASpec, list[Row], list[Row]]


def _read(path: Path) -> list[Row]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def _key(row: Row) -> Key:
    return row["_ng_task_index"], row["_ng_rollout_index"]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    spec = QASpec(tasks=150, rollouts_per_task=3, seed=5)
    inputs_path, rollouts_path = write_qa_dataset(tmp_path_factory.mktemp("qa"), spec)
    return spec, _read(inputs_path), _read(rollouts_path)


def test_same_seed_gives_byte_identical_files_and_another_seed_does_not(tmp_path: Path) -> None:
    spec = QASpec(tasks=12, rollouts_per_task=2, seed=3)
    first = write_qa_dataset(tmp_path / "a", spec)
    second = write_qa_dataset(tmp_path / "b", spec)
    other = write_qa_dataset(tmp_path / "c", QASpec(tasks=12, rollouts_per_task=2, seed=4))
    for a, b, c in zip(first, second, other, strict=True):
        assert a.read_bytes() == b.read_bytes()
        assert a.read_bytes() != c.read_bytes()
    # A second write replaces the files in place and leaves no temporary file behind.
    write_qa_dataset(tmp_path / "a", spec)
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == sorted([INPUTS_FILE_NAME, ROLLOUTS_FILE_NAME])


def test_join_keys_match_one_to_one(dataset: Dataset) -> None:
    spec, inputs, rollouts = dataset
    expected = [(t, r) for t in range(spec.tasks) for r in range(spec.rollouts_per_task)]
    # Inputs are in dispatch order; rollouts hold the same keys once each, in a shuffled completion order.
    assert [_key(row) for row in inputs] == expected
    rollout_keys = [_key(row) for row in rollouts]
    assert sorted(rollout_keys) == expected
    assert rollout_keys != expected
    for n in (1, 2, 3, 17, 256, 1000):
        assert sorted(completion_order(n, 9)) == list(range(n))


def test_rows_have_the_judge_fields_and_nemo_gym_stamps(dataset: Dataset) -> None:
    spec, inputs, rollouts = dataset
    by_key = {_key(row): row for row in inputs}
    for row in inputs:
        assert tuple(row) == (
            "responses_create_params",
            "question",
            "expected_answer",
            "uuid",
            "agent_ref",
            "_ng_task_index",
            "_ng_rollout_index",
        )
        assert row["agent_ref"] == {"type": "responses_api_agents", "name": "qa_simple_agent"}
        prompt = row["responses_create_params"]["input"][0]["content"]
        assert row["question"] in prompt and row["expected_answer"]
    assert len({row["uuid"] for row in inputs}) == spec.tasks
    for row in rollouts:
        source = by_key[_key(row)]
        assert tuple(row)[-5:] == (
            "_ng_task_index",
            "_ng_rollout_index",
            "agent_ref",
            "_ng_environment_server",
            "_ng_result_type",
        )
        assert row["_ng_environment_server"] == "qa_environment_server"
        assert row["_ng_result_type"] == "legacy_agent"
        assert row["expected_answer"] == source["expected_answer"]
        assert (
            row["responses_create_params"]["input"][0]["content"]
            == source["responses_create_params"]["input"][0]["content"]
        )
        assert row["response"]["output"][-1]["type"] == "message"
        usage = row["response"]["usage"]
        assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
        assert usage["output_tokens"] > usage["output_tokens_details"]["reasoning_tokens"]
    assert any(item["type"] == "reasoning" for row in rollouts for item in row["response"]["output"])


def test_stored_rewards_are_the_local_judge_rule_verdicts(dataset: Dataset) -> None:
    _, inputs, rollouts = dataset
    by_key = {_key(row): row for row in inputs}
    for row in rollouts:
        text = last_assistant_text(row["response"])
        assert row["extracted_answer"] == (text or None)
        same, _ = equivalent(by_key[_key(row)]["expected_answer"], text or NO_ANSWER)
        assert row["reward"] == (1.0 if same else 0.0), _key(row)
        (evaluation,) = row["judge_evaluations"]
        assert evaluation["verdict_label"] == ("[[A=B]]" if same else "[[A!=B]]")
        assert by_key[_key(row)]["question"] in evaluation["responses_create_params"]["messages"][-1]["content"]


def test_answers_come_in_the_forms_the_judge_rule_must_handle(dataset: Dataset) -> None:
    _, inputs, rollouts = dataset
    expected = {_key(row): row["expected_answer"] for row in inputs}
    texts = [last_assistant_text(row["response"]) for row in rollouts]
    assert "" in texts
    assert any("\\boxed{" in t for t in texts) and any("Answer: " in t for t in texts)
    assert any(t.endswith(".") and "The answer is " in t and "\\boxed" not in t for t in texts)
    rewards = Counter(row["reward"] for row in rollouts)
    assert rewards[0.0] > 0.2 * len(rollouts) and rewards[1.0] > 0.3 * len(rollouts)
    # Right answers written differently from the expected string, and judged equal (1/2 vs 0.5, 12 cm vs 12cm).
    finals = [
        (final_answer(t).strip(), expected[_key(row)], row["reward"]) for t, row in zip(texts, rollouts, strict=True)
    ]
    assert sum(1 for got, want, reward in finals if reward == 1.0 and got != want) > 20
    assert any("/" in want and "." in got and reward == 1.0 for got, want, reward in finals)
    assert any(want[-1].isalpha() and want[0].isdigit() for want in expected.values()), "quantities with units"
    # Per-task difficulty: some tasks are solved by every rollout, some by none.
    per_task: dict[int, set[float]] = {}
    for row in rollouts:
        per_task.setdefault(row["_ng_task_index"], set()).add(row["reward"])
    assert {frozenset(v) for v in per_task.values()} >= {frozenset({0.0}), frozenset({1.0}), frozenset({0.0, 1.0})}


def test_rows_are_streamed_not_materialised() -> None:
    started = time.perf_counter()
    first = next(iter_rollout_rows(QASpec(tasks=1_000_000)))
    assert time.perf_counter() - started < 0.5
    assert 0 <= first["_ng_task_index"] < 1_000_000


def test_bad_spec_is_refused() -> None:
    with pytest.raises(ValueError, match="tasks"):
        QASpec(tasks=0)
    with pytest.raises(ValueError, match="rollouts_per_task"):
        QASpec(tasks=1, rollouts_per_task=0)


def test_command_line_writes_and_reports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cli"
    argv = ["--tasks", "3", "--rollouts-per-task", "2", "--seed", "5", "--out", str(out)]
    assert qa_rollouts.main(argv) == 0
    printed = capsys.readouterr().out
    assert f"{out / INPUTS_FILE_NAME}: 6 rows" in printed
    assert f"{out / ROLLOUTS_FILE_NAME}: 6 rows" in printed
    assert (out / ROLLOUTS_FILE_NAME).read_bytes() == write_qa_dataset(
        tmp_path / "api", QASpec(tasks=3, rollouts_per_task=2, seed=5)
    )[1].read_bytes()
    with pytest.raises(SystemExit) as exc:
        qa_rollouts.main(["--tasks", "0", "--out", str(out)])
    assert exc.value.code == 2


def test_bundled_sample_is_what_the_generator_writes(tmp_path: Path) -> None:
    # The command in samples/judge/README.md.
    regenerated = write_qa_dataset(tmp_path, QASpec(tasks=50, rollouts_per_task=4, seed=11))
    for path in regenerated:
        assert path.read_bytes() == (SAMPLE_DIR / path.name).read_bytes(), path.name
