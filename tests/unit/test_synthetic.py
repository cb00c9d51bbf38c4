"""The synthetic mcqa generator: NeMo Gym's shapes, determinism, join keys and the stored verdicts."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from reverify_assets.servers.mcqa import grading
from reverify_assets.synthetic import mcqa_rollouts
from reverify_assets.synthetic.mcqa_rollouts import (
    INPUTS_FILE_NAME,
    ROLLOUTS_FILE_NAME,
    SyntheticSpec,
    iter_rollout_rows,
    write_mcqa_dataset,
)

REPO = Path(__file__).resolve().parents[2]
# The repo's copy first; the shared one lets the test run before the copy lands.
_CONFORMANCE_DIRS = (REPO / "tests/data/conformance/mcqa", Path("/work/shared/conformance/mcqa"))
SAMPLE_DIR = REPO / "samples/mcqa"

Row = dict[str, Any]
Key = tuple[int, int]
Dataset = tuple[SyntheticSpec, list[Row], list[Row]]


def _conformance_dir() -> Path:
    for candidate in _CONFORMANCE_DIRS:
        if (candidate / ROLLOUTS_FILE_NAME).is_file() and (candidate / INPUTS_FILE_NAME).is_file():
            return candidate
    pytest.skip("no mcqa conformance files found")


def _read(path: Path) -> list[Row]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def _key(row: Row) -> Key:
    return row["_ng_task_index"], row["_ng_rollout_index"]


def _key_shapes(row: Row, *, rollout: bool) -> Iterator[tuple[str, tuple[str, ...]]]:
    """(where, keys in order) for the row and each nested object whose shape NeMo Gym fixes."""
    yield "row", tuple(row)
    yield "responses_create_params", tuple(row["responses_create_params"])
    for message in row["responses_create_params"]["input"]:
        yield "input message", tuple(message)
    yield "agent_ref", tuple(row["agent_ref"])
    if not rollout:
        return
    response = row["response"]
    yield "response", tuple(response)
    yield "usage", tuple(response["usage"])
    for item in response["output"]:
        if item["type"] == "message":
            yield "message item", tuple(item)
            for part in item["content"]:
                yield "content part", tuple(part)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    spec = SyntheticSpec(tasks=120, rollouts_per_task=3, seed=11)
    inputs_path, rollouts_path = write_mcqa_dataset(tmp_path_factory.mktemp("synthetic"), spec)
    return spec, _read(inputs_path), _read(rollouts_path)


def test_same_seed_gives_byte_identical_files_and_another_seed_does_not(tmp_path: Path) -> None:
    spec = SyntheticSpec(tasks=15, rollouts_per_task=2, seed=3)
    first = write_mcqa_dataset(tmp_path / "a", spec)
    second = write_mcqa_dataset(tmp_path / "b", spec)
    other = write_mcqa_dataset(tmp_path / "c", SyntheticSpec(tasks=15, rollouts_per_task=2, seed=4))
    for a, b, c in zip(first, second, other, strict=True):
        assert a.read_bytes() == b.read_bytes()
        assert a.read_bytes() != c.read_bytes()


def test_files_are_compact_jsonl_and_no_temporary_file_is_left(tmp_path: Path) -> None:
    out = tmp_path / "out"
    spec = SyntheticSpec(tasks=5, rollouts_per_task=2)
    write_mcqa_dataset(out, spec)
    # A second run replaces the files in place.
    inputs_path, rollouts_path = write_mcqa_dataset(out, spec)
    assert sorted(p.name for p in out.iterdir()) == sorted([INPUTS_FILE_NAME, ROLLOUTS_FILE_NAME])
    for path in (inputs_path, rollouts_path):
        data = path.read_bytes()
        assert data.endswith(b"\n")
        lines = data.split(b"\n")[:-1]
        assert len(lines) == spec.rows
        assert all(line == orjson.dumps(orjson.loads(line)) for line in lines)


def test_join_keys_match_one_to_one(dataset: Dataset) -> None:
    spec, inputs, rollouts = dataset
    input_keys = [_key(row) for row in inputs]
    rollout_keys = [_key(row) for row in rollouts]
    expected = [(t, r) for t in range(spec.tasks) for r in range(spec.rollouts_per_task)]
    # Inputs are in dispatch order; rollouts hold the same keys once each, in completion order.
    assert input_keys == expected
    assert sorted(rollout_keys) == expected
    assert rollout_keys != expected


def test_k_rollouts_per_task_sharing_one_dataset_row(dataset: Dataset) -> None:
    spec, inputs, rollouts = dataset
    assert Counter(row["_ng_task_index"] for row in rollouts) == dict.fromkeys(
        range(spec.tasks), spec.rollouts_per_task
    )
    by_task: dict[int, list[Row]] = {}
    for row in inputs:
        by_task.setdefault(row["_ng_task_index"], []).append(row)
    for rows in by_task.values():
        assert len(rows) == spec.rollouts_per_task
        strip = [{k: v for k, v in row.items() if k != "_ng_rollout_index"} for row in rows]
        assert all(s == strip[0] for s in strip)
    assert len({rows[0]["uuid"] for rows in by_task.values()}) == spec.tasks


def test_rows_have_nemo_gym_fields_in_nemo_gym_order(
    dataset: Dataset,
) -> None:
    _, inputs, rollouts = dataset
    conformance = _conformance_dir()
    for name, rows, rollout in ((INPUTS_FILE_NAME, inputs, False), (ROLLOUTS_FILE_NAME, rollouts, True)):
        real = dict(_key_shapes(_read(conformance / name)[0], rollout=rollout))
        for row in rows:
            for where, keys in _key_shapes(row, rollout=rollout):
                assert keys == real[where], f"{name}: {where} of {_key(row)}"


def test_reasoning_items_have_the_responses_api_shape(
    dataset: Dataset,
) -> None:
    _, _, rollouts = dataset
    reasoning = [i for row in rollouts for i in row["response"]["output"] if i["type"] == "reasoning"]
    assert reasoning
    for item in reasoning:
        assert tuple(item) == ("id", "summary", "type", "encrypted_content", "content")
        assert item["id"].startswith("rs_")
        assert [tuple(s) for s in item["summary"]] == [("text", "type")]
    # The reasoning item never carries the answer, and it always comes before the message.
    for row in rollouts:
        assert row["response"]["output"][-1]["type"] == "message"


def test_options_prompt_and_grading_modes(dataset: Dataset) -> None:
    _, inputs, _ = dataset
    counts: Counter[int] = Counter()
    for row in inputs:
        letters = [next(iter(option)) for option in row["options"]]
        assert letters == list("ABCDEFGHIJ"[: len(letters)])
        counts[len(letters)] += 1
        assert row["expected_answer"] in letters
        assert row["grading_mode"] in grading.ROW_GRADING_MODES
        prompt = row["responses_create_params"]["input"][0]["content"]
        for option in row["options"]:
            ((letter, text),) = option.items()
            assert f"{letter}: {text}" in prompt or f"{letter}) {text}" in prompt
    assert min(counts) >= 4
    assert max(counts) <= 10
    assert len(counts) >= 3
    modes = Counter(row["grading_mode"] for row in inputs)
    assert modes["strict_single_letter_boxed"] > modes["lenient_boxed"] > 0


def test_stored_verdict_is_the_grading_module_under_the_row_mode(
    dataset: Dataset,
) -> None:
    _, inputs, rollouts = dataset
    by_key = {_key(row): row for row in inputs}
    for row in rollouts:
        source = by_key[_key(row)]
        verdict = grading.grade(
            response=row["response"],
            options=source["options"],
            expected_answer=source["expected_answer"],
            mode=grading.effective_mode(None, source["grading_mode"]),
        )
        assert (row["reward"], row["extracted_answer"], row["expected_answer"]) == (
            verdict.reward,
            verdict.extracted_answer,
            verdict.expected_answer,
        )
        prompt = source["responses_create_params"]["input"][0]["content"]
        assert row["responses_create_params"]["input"][0]["content"] == prompt


def test_answer_formats_make_the_grading_modes_disagree(
    dataset: Dataset,
) -> None:
    _, inputs, rollouts = dataset
    by_key = {_key(row): row for row in inputs}

    def mean_reward(server_mode: str) -> float:
        total = 0.0
        for row in rollouts:
            source = by_key[_key(row)]
            total += grading.grade(
                response=row["response"],
                options=source["options"],
                expected_answer=source["expected_answer"],
                mode=grading.effective_mode(server_mode, source["grading_mode"]),
            ).reward
        return total / len(rollouts)

    strict, lenient = mean_reward("strict_single_letter_boxed"), mean_reward("lenient_boxed")
    assert 0.2 < strict < lenient - 0.05 < 0.9
    assert mean_reward("lenient_answer_colon") > 0
    texts = [grading.output_text(row["response"]) for row in rollouts]
    assert "" in texts
    assert any(r["extracted_answer"] is None for r in rollouts)
    # Per-task difficulty: some tasks are solved by every rollout, some by none.
    per_task: dict[int, set[float]] = {}
    for row in rollouts:
        per_task.setdefault(row["_ng_task_index"], set()).add(row["reward"])
    assert {frozenset(v) for v in per_task.values()} >= {frozenset({0.0}), frozenset({0.0, 1.0})}


def test_usage_counts_follow_the_text(dataset: Dataset) -> None:
    _, _, rollouts = dataset
    for row in rollouts:
        usage = row["response"]["usage"]
        prompt = row["responses_create_params"]["input"][0]["content"]
        assert usage["input_tokens"] > len(prompt) // 5
        assert usage["output_tokens"] > len(grading.output_text(row["response"])) // 5
        assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
        assert usage["output_tokens"] > usage["output_tokens_details"]["reasoning_tokens"]


def test_rows_are_streamed_not_materialised() -> None:
    # A million-task spec must yield its first row at once: nothing is built ahead of the consumer.
    started = time.perf_counter()
    first = next(iter_rollout_rows(SyntheticSpec(tasks=1_000_000)))
    assert time.perf_counter() - started < 0.5
    assert 0 <= first["_ng_task_index"] < 1_000_000


def test_bad_spec_is_refused() -> None:
    with pytest.raises(ValueError, match="tasks"):
        SyntheticSpec(tasks=0)
    with pytest.raises(ValueError, match="rollouts_per_task"):
        SyntheticSpec(tasks=1, rollouts_per_task=0)


def test_command_line_writes_and_reports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cli"
    argv = ["--tasks", "3", "--rollouts-per-task", "2", "--seed", "5", "--out", str(out)]
    assert mcqa_rollouts.main(argv) == 0
    printed = capsys.readouterr().out
    assert f"{out / INPUTS_FILE_NAME}: 6 rows" in printed
    assert f"{out / ROLLOUTS_FILE_NAME}: 6 rows" in printed
    with pytest.raises(SystemExit) as exc:
        mcqa_rollouts.main(["--tasks", "0", "--out", str(out)])
    assert exc.value.code == 2


def test_bundled_sample_is_what_the_generator_writes(tmp_path: Path) -> None:
    if not (SAMPLE_DIR / ROLLOUTS_FILE_NAME).is_file():
        pytest.skip("samples/mcqa not generated")
    # The command in samples/mcqa/README.md.
    regenerated = write_mcqa_dataset(tmp_path, SyntheticSpec(tasks=75, rollouts_per_task=4, seed=7))
    for path in regenerated:
        assert path.read_bytes() == (SAMPLE_DIR / path.name).read_bytes(), path.name
