"""Verify payloads, result routing and file names, as NeMo Gym builds and names them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from reverify_assets.errors import InputError
from reverify_assets.files.names import RunFiles, expand_input_glob, is_auxiliary_jsonl
from reverify_assets.rows.payload import build_verify_payload
from reverify_assets.rows.result_routing import Destination, destination_of, run_label, stamp_result

MCQA_INPUT = {
    "responses_create_params": {"input": [{"role": "user", "content": "Q"}]},
    "options": [{"A": "x"}, {"B": "y"}],
    "expected_answer": "B",
    "grading_mode": "strict_single_letter_boxed",
    "uuid": "u-1",
    "agent_ref": {"type": "responses_api_agents", "name": "mcqa_simple_agent"},
    "_ng_task_index": 3,
    "_ng_rollout_index": 1,
}
RESPONSE = {"output": [{"type": "message", "content": [{"type": "output_text", "text": "\\boxed{B}"}]}]}
ROLLOUT = {
    "responses_create_params": {"input": "ignored"},
    "response": RESPONSE,
    "reward": 1.0,
    "extracted_answer": "B",
    "_ng_task_index": 3,
    "_ng_rollout_index": 1,
    "_ng_environment_server": "mcqa_environment_server",
    "_ng_result_type": "legacy_agent",
}


def test_flat_payload_is_the_input_row_plus_the_response_in_nemo_gym_order() -> None:
    payload = build_verify_payload(MCQA_INPUT, ROLLOUT, (3, 1))
    assert list(payload) == [*MCQA_INPUT, "response"]
    assert payload["response"] is RESPONSE
    assert payload["responses_create_params"] == MCQA_INPUT["responses_create_params"]
    assert "reward" not in payload and "_ng_environment_server" not in payload


def test_deliverables_and_reference_ids_travel_with_the_response() -> None:
    rollout = {**ROLLOUT, "deliverables_dir": "/d", "reference_ids": ["r1"]}
    payload = build_verify_payload(MCQA_INPUT, rollout, (3, 1))
    assert payload["deliverables_dir"] == "/d" and payload["reference_ids"] == ["r1"]
    assert list(payload)[-1] == "response"


def test_taskset_rows_are_flattened() -> None:
    row = {
        "task_id": "t-9",
        "agent_ref": {"name": "a"},
        "_ng_task_index": 0,
        "_ng_rollout_index": 0,
        "task_input": {"task_data": {"question": "q", "expected_answer": "7"}, "metadata": {"k": 1}},
    }
    payload = build_verify_payload(row, ROLLOUT, (0, 0))
    assert list(payload) == [
        "agent_ref",
        "_ng_task_index",
        "_ng_rollout_index",
        "question",
        "expected_answer",
        "metadata",
        "response",
    ]


def test_taskset_conflict_is_an_error() -> None:
    row = {"expected_answer": "1", "task_input": {"task_data": {"expected_answer": "2"}}}
    with pytest.raises(InputError) as caught:
        build_verify_payload(row, ROLLOUT, (0, 0))
    assert (caught.value.path, caught.value.line, caught.value.key) == (None, None, "(task 0, rollout 0)")
    assert "field 'expected_answer' has different values" in str(caught.value)  # the field: no error field holds it


@pytest.mark.parametrize("response", ["missing", None])
def test_rollout_without_response_names_the_key(response: object) -> None:
    rollout = {k: v for k, v in ROLLOUT.items() if k != "response"}
    if response is None:
        rollout["response"] = None
    with pytest.raises(InputError) as caught:
        build_verify_payload(MCQA_INPUT, rollout, (3, 1))
    assert (caught.value.path, caught.value.line, caught.value.key) == (None, None, "(task 3, rollout 1)")


@pytest.mark.parametrize(
    ("result", "destination"),
    [
        ({"reward": 1.0}, Destination.OUTPUT),
        ({"reward": 0.0, "_ng_failure_class": None}, Destination.OUTPUT),
        ({"reward": 0.0, "_ng_failure_class": "judge_failed"}, Destination.SIDECAR),
        ({"_ng_failure_class": "verify_failed"}, Destination.SIDECAR),
        ({"reward": 1.0, "_ng_no_persist": True}, Destination.NOWHERE),
        ({"_ng_failure_class": "judge_failed", "_ng_no_persist": True}, Destination.NOWHERE),
    ],
)
def test_destination(result: dict[str, Any], destination: Destination) -> None:
    assert destination_of(result) is destination


def test_stamps_come_from_the_payload_only() -> None:
    payload = {**MCQA_INPUT, "task_source": "mcqa", "response": RESPONSE}
    result = stamp_result({"reward": 1.0, "agent_ref": {"name": "server-said"}}, payload, (3, 1))
    assert result == {
        "reward": 1.0,
        "agent_ref": MCQA_INPUT["agent_ref"],
        "_ng_task_index": 3,
        "_ng_rollout_index": 1,
        "task_source": "mcqa",
    }


@pytest.mark.parametrize(
    ("row", "label"),
    [
        ({"agent_ref": {"name": "a"}}, "a"),
        ({"agent_ref": {"name": "a"}, "_ng_environment_server": "env"}, "env"),
        ({"agent_ref": {}}, None),
        ({}, None),
    ],
)
def test_run_label(row: dict[str, Any], label: str | None) -> None:
    assert run_label(row) == label


@pytest.mark.parametrize(
    ("output", "unsafe", "names"),
    [
        ("out/rs.jsonl", False, ("rs.jsonl", "rs_failures.jsonl", "rs_aggregate_metrics.json")),
        ("out/rs.jsonl", True, ("unsafe_rs.jsonl", "unsafe_rs_failures.jsonl", "unsafe_rs_aggregate_metrics.json")),
        ("rollouts.jsonl", False, ("rollouts.jsonl", "rollouts_failures.jsonl", "rollouts_aggregate_metrics.json")),
    ],
)
def test_run_file_names(output: str, unsafe: bool, names: tuple[str, str, str]) -> None:
    files = RunFiles.for_output(Path(output), unsafe=unsafe)
    assert (files.output.name, files.sidecar.name, files.metrics.name) == names
    assert files.output.parent == Path(output).parent


@pytest.mark.parametrize(
    ("name", "auxiliary"),
    [("rs_failures.jsonl", True), ("rollouts_materialized_inputs.jsonl", True), ("rs-shard1.jsonl", False)],
)
def test_auxiliary_files(name: str, auxiliary: bool) -> None:
    assert is_auxiliary_jsonl(Path(name)) is auxiliary


def test_input_glob_expansion(tmp_path: Path) -> None:
    for name in ["b.jsonl", "a.jsonl", "a_failures.jsonl", "x_materialized_inputs.jsonl", "c.txt"]:
        (tmp_path / name).write_text("")
    d = str(tmp_path)
    assert [p.name for p in expand_input_glob(f"{d}/*.jsonl")] == ["a.jsonl", "b.jsonl"]
    assert [p.name for p in expand_input_glob(f" {d}/b.jsonl , ,{d}/*.jsonl,")] == ["b.jsonl", "a.jsonl"]
    assert [p.name for p in expand_input_glob(f"{d}/a.jsonl,{d}/a.jsonl")] == ["a.jsonl"]
    assert expand_input_glob(f"{d}/none*.jsonl") == []
