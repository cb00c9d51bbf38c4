"""Whether a rollout was produced from its input row: the prompt fingerprint survives what NeMo Gym adds to a
rollout's request and catches what another dataset changes; the join and ``reverify compare`` refuse a mismatch
naming the files, the keys and the difference."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import orjson
import pytest
import simdjson

from reverify_assets.compare.paired_rows import join_keys, refuse_other_rollouts
from reverify_assets.compare.side_index import index_side
from reverify_assets.errors import InputError
from reverify_assets.keys.key_columns import scan_key_columns
from reverify_assets.keys.key_index import join_rollouts_to_inputs, key_index_of, scan_keys
from reverify_assets.keys.rollout_identity import NO_TEXT, PromptShape, prompt_fingerprint, response_fingerprint
from reverify_assets.keys.rollout_mismatch import first_rows_disagree

ROOT = Path(__file__).resolve().parents[2]
NEMO_GYM_RUNS = [
    ROOT / "tests" / "data" / "conformance" / "mcqa",
    *sorted(path for path in (ROOT / "tests" / "data" / "nemo_gym_servers").iterdir() if path.is_dir()),
]

MESSAGES = [
    {"role": "system", "content": "Count the circles."},
    {"role": "user", "content": [{"type": "input_image", "image_url": "data:image/png;base64,AAAA"}]},
]
# What NeMo Gym's pydantic models make of MESSAGES in the rollout: defaults, message types, re-ordered keys.
AS_NEMO_GYM_WRITES_THEM = [
    {"content": "Count the circles.", "role": "system", "type": "message"},
    {
        "content": [{"detail": "auto", "type": "input_image", "image_url": "data:image/png;base64,AAAA"}],
        "role": "user",
        "type": "message",
    },
]


def prompted(prompt: Any, **extra: Any) -> dict[str, Any]:
    return {"responses_create_params": {"input": prompt, **extra}}


@pytest.mark.parametrize(
    ("input_row", "rollout_row"),
    [
        (prompted(MESSAGES), prompted(AS_NEMO_GYM_WRITES_THEM, background=None, include=None, store=True)),
        (prompted("What is 2 + 2?"), prompted("What is 2 + 2?", temperature=0.0)),
        ({"task_input": prompted(MESSAGES)}, prompted(AS_NEMO_GYM_WRITES_THEM)),  # a materialized taskset row
        (
            prompted([{"type": "function_call", "name": "f", "arguments": "{}", "call_id": "c"}]),
            prompted([{"arguments": "{}", "call_id": "c", "name": "f", "type": "function_call", "id": None}]),
        ),
    ],
)
def test_what_nemo_gym_adds_to_a_rollout_leaves_the_fingerprint(input_row: dict, rollout_row: dict) -> None:
    assert prompt_fingerprint(input_row) == prompt_fingerprint(rollout_row) != NO_TEXT


def changed(change: str) -> dict[str, Any]:
    messages = copy.deepcopy(MESSAGES)
    if change == "text":
        messages[0]["content"] = "Count the squares."
    elif change == "image":
        messages[1]["content"][0]["image_url"] = "data:image/png;base64,BBBB"
    elif change == "split":
        messages[0]["content"] = [
            {"type": "input_text", "text": "Count the "},
            {"type": "input_text", "text": "circles."},
        ]
    elif change == "order":
        messages.reverse()
    elif change == "system first":
        messages.insert(0, {"role": "system", "content": "Be brief."})
    return prompted(messages)


@pytest.mark.parametrize("change", ["text", "image", "split", "order", "system first"])
def test_another_prompt_has_another_fingerprint(change: str) -> None:
    assert prompt_fingerprint(changed(change)) != prompt_fingerprint(prompted(MESSAGES))


def test_a_conversation_that_goes_on_after_the_first_user_message_is_the_same_prompt() -> None:
    """A multi-turn rollout's request holds the whole conversation: the task is what led to the first user
    message (blackjack's shipped example rollouts)."""
    conversation = [*AS_NEMO_GYM_WRITES_THEM, {"role": "assistant", "content": "3"}, {"role": "user", "content": "?"}]
    assert prompt_fingerprint(prompted(conversation)) == prompt_fingerprint(prompted(MESSAGES))


def test_a_user_message_without_text_is_still_a_user_message() -> None:
    """Its content (audio, an empty list) gives no text to hash: a prompt with it is not one without a user
    message, whose system prompt alone would then decide."""
    system = {"role": "system", "content": "Transcribe."}
    audio = prompted([system, {"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}])
    assert prompt_fingerprint(audio) != prompt_fingerprint(prompted([system]))
    assert prompt_fingerprint(audio) & ((1 << 31) - 1) != 0


@pytest.mark.parametrize(
    "row", [{}, {"responses_create_params": {}}, prompted(None), prompted([]), prompted(3), {"task_input": 1}]
)
def test_a_row_without_a_prompt_is_never_compared(row: dict[str, Any]) -> None:
    assert prompt_fingerprint(row) == NO_TEXT


@pytest.mark.parametrize("row", [prompted(MESSAGES), prompted("plain"), {"task_input": prompted(MESSAGES)}, {}])
def test_the_key_scans_parse_agrees_with_a_python_rows(row: dict[str, Any]) -> None:
    parsed = simdjson.Parser().parse(orjson.dumps(row))
    assert prompt_fingerprint(parsed) == prompt_fingerprint(row)


SYSTEM, USER = {"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}
# One scan's rows in turn: the short way learns each shape and must never answer for a row of another (but for a
# user message before the user message it learned, which it takes for the head: see PromptShape).
ROWS_OF_MANY_SHAPES = [
    prompted([USER]),
    prompted([{**USER, "content": "3+3?"}]),
    prompted([SYSTEM, USER]),
    prompted([{**SYSTEM, "content": "Be long."}, USER]),
    prompted([USER]),  # the user's message first again: no head
    prompted([SYSTEM, {"role": "assistant", "content": "Hi."}, USER]),
    prompted([SYSTEM, SYSTEM]),  # no user message where the last row had it
    prompted([SYSTEM]),
    prompted({"0": USER}),
    prompted([[USER], USER]),
    prompted([None, USER]),
    prompted([SYSTEM, {"role": "user"}]),
    prompted([SYSTEM, {**USER, "content": [{"type": "input_text", "text": "2+2?"}]}]),
    prompted([{"content": "Be brief."}, USER]),  # a message without a role before the user's
    prompted("2+2?"),
    {"task_input": prompted([SYSTEM, USER])},
    {"responses_create_params": None},
    {},
    prompted([SYSTEM, USER]),
]


def test_the_key_scans_short_way_agrees_with_the_walk_whatever_came_before() -> None:
    shape, parser = PromptShape(), simdjson.Parser()
    for at, row in enumerate(ROWS_OF_MANY_SHAPES):
        parsed = parser.parse(orjson.dumps(row))
        assert shape.fingerprint(parsed) == prompt_fingerprint(row), f"row {at}: {row}"
        del parsed


def test_a_response_is_fingerprinted_by_its_text() -> None:
    def response(text: str, **extra: Any) -> dict[str, Any]:
        item = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text, **extra}]}
        return {"response": {"output": [item], "id": "resp"}}

    assert response_fingerprint(response("B")) == response_fingerprint(response("B", annotations=[]))
    assert response_fingerprint(response("B")) != response_fingerprint(response("C"))
    assert response_fingerprint({"response": None}) == NO_TEXT


def write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))
    return path


def keyed(task: int, rollout: int, prompt: Any, **fields: Any) -> dict[str, Any]:
    return {"_ng_task_index": task, "_ng_rollout_index": rollout, **prompted(prompt), **fields}


def indexes(inputs: Path, rollouts: Path, *, fast: bool) -> tuple[Any, Any]:
    if fast:
        return (
            key_index_of(inputs, scan_key_columns(inputs, with_routes=True, with_prompts=True)),
            key_index_of(rollouts, scan_key_columns(rollouts, with_prompts=True)),
        )
    return scan_keys(inputs, with_prompts=True), scan_keys(rollouts, with_prompts=True)


@pytest.mark.parametrize("fast", [True, False], ids=["key scan", "exact scan"])
def test_the_join_refuses_rollouts_of_another_dataset_naming_files_keys_and_difference(
    tmp_path: Path, fast: bool
) -> None:
    inputs = write(tmp_path / "inputs.jsonl", [keyed(task, 0, f"Question {task}?") for task in range(4)])
    theirs = [keyed(task, 0, f"Question {task}?") for task in range(4)]
    theirs[2] = keyed(2, 0, "What else?")
    theirs[3] = keyed(3, 0, "Something else entirely?")
    rollouts = write(tmp_path / "rollouts.jsonl", theirs[::-1])
    with pytest.raises(InputError) as raised:
        join_rollouts_to_inputs(*indexes(inputs, rollouts, fast=fast))
    assert (raised.value.path, raised.value.line, raised.value.key) == (rollouts, 1, "(task 3, rollout 0)")
    message = str(raised.value)
    # What no field holds: the inputs file, the other key, the difference, and the flag that lets it through.
    assert str(inputs) in message and "(task 2, rollout 0)" in message
    assert "  -Question 3?\n  +Something else entirely?" in message
    assert "--allow-prompt-mismatch (++allow_prompt_mismatch=true)" in message
    plan = join_rollouts_to_inputs(*indexes(inputs, rollouts, fast=fast), check_prompts=False)
    assert plan.height == 4 and "prompt" not in "".join(plan.columns)


def test_a_user_turn_the_environment_writes_at_rollout_time_is_no_mismatch(tmp_path: Path) -> None:
    """An input row with no user message (a user simulator, a text game writes it): the messages before it
    decide (tau2-style conversational_tool_use_simulation's and tales' example rollouts)."""
    system = [{"role": "system", "content": "You are a bank's agent."}]
    inputs = write(tmp_path / "inputs.jsonl", [keyed(0, 0, system), keyed(1, 0, [{"role": "system", "content": "x"}])])
    rollouts = write(
        tmp_path / "rollouts.jsonl",
        [keyed(task, 0, [*system, {"role": "user", "content": "Hi, my card is lost."}]) for task in range(2)],
    )
    with pytest.raises(InputError) as raised:
        join_rollouts_to_inputs(*indexes(inputs, rollouts, fast=True))
    assert (raised.value.path, raised.value.line, raised.value.key) == (rollouts, 2, "(task 1, rollout 0)")


def test_a_task_whose_input_rows_differ_is_read_again_not_refused(tmp_path: Path) -> None:
    """The inputs' scan gives a row of the task just seen, and as long, that row's fingerprint: when the two
    prompts differ after all, the join reads both rows again before it says a word."""
    inputs = write(tmp_path / "inputs.jsonl", [keyed(0, 0, "Seed A?"), keyed(0, 1, "Seed B?")])
    rollouts = write(tmp_path / "rollouts.jsonl", [keyed(0, 1, "Seed B?"), keyed(0, 0, "Seed A?")])
    assert join_rollouts_to_inputs(*indexes(inputs, rollouts, fast=True)).height == 2
    other = write(tmp_path / "other.jsonl", [keyed(0, 1, "Seed C?"), keyed(0, 0, "Seed A?")])
    with pytest.raises(InputError) as raised:
        join_rollouts_to_inputs(*indexes(inputs, other, fast=True))
    assert (raised.value.path, raised.value.line, raised.value.key) == (other, 1, "(task 0, rollout 1)")
    assert "  -Seed B?\n  +Seed C?" in str(raised.value)  # the rows read again: the difference


def test_rows_without_prompts_join_as_before(tmp_path: Path) -> None:
    inputs = write(tmp_path / "inputs.jsonl", [{"_ng_task_index": 0, "_ng_rollout_index": 0}])
    rollouts = write(tmp_path / "rollouts.jsonl", [keyed(0, 0, "Anything?")])
    assert join_rollouts_to_inputs(*indexes(inputs, rollouts, fast=True)).height == 1


@pytest.mark.parametrize("run", NEMO_GYM_RUNS, ids=lambda path: path.name)
def test_no_false_alarm_on_runs_nemo_gym_wrote(run: Path) -> None:
    inputs, rollouts = run / "rollouts_materialized_inputs.jsonl", run / "rollouts.jsonl"
    for fast in (True, False):
        assert join_rollouts_to_inputs(*indexes(inputs, rollouts, fast=fast)).height > 0


def test_compare_takes_either_side_as_the_rollouts(tmp_path: Path) -> None:
    """The original rollouts against an output of them, for an environment that writes the user's turn: the
    rollout's prompt has it, the output's (its input row's) does not, whichever side each is."""
    system = [{"role": "system", "content": "You are a bank's agent."}]
    output = [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Hello"}]}]
    rollout = keyed(0, 0, [*system, {"role": "user", "content": "My card is lost."}], response={"output": output})
    scored = keyed(0, 0, system, response={"output": output}, reward=1.0)
    rollouts = write(tmp_path / "rollouts.jsonl", [{**rollout, "reward": 0.0}])
    outputs = write(tmp_path / "out.jsonl", [scored])
    for baseline, candidate in ((rollouts, outputs), (outputs, rollouts)):
        joined = join_keys(index_side(baseline).keys, index_side(candidate).keys)
        refuse_other_rollouts(joined, baseline, candidate)


def test_compare_refuses_scorings_of_different_rollouts(tmp_path: Path) -> None:
    def scored(answer: str) -> dict[str, Any]:
        output = [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": answer}]}]
        return keyed(0, 0, "Question?", response={"output": output}, reward=1.0)

    baseline = write(tmp_path / "baseline.jsonl", [scored("B")])
    same = write(tmp_path / "same.jsonl", [scored("B")])
    other = write(tmp_path / "other.jsonl", [scored("C")])
    base = index_side(baseline)
    refuse_other_rollouts(join_keys(base.keys, index_side(same).keys), baseline, same)
    with pytest.raises(InputError) as raised:
        refuse_other_rollouts(join_keys(base.keys, index_side(other).keys), baseline, other)
    assert (raised.value.path, raised.value.line, raised.value.key) == (other, 1, "(task 0, rollout 0)")
    message = str(raised.value)
    # What no field holds: the baseline, the responses' difference, and the flag that lets them through.
    assert str(baseline) in message and "different responses" in message and "  -B\n  +C" in message
    assert "pass --allow-prompt-mismatch." in message


@pytest.mark.parametrize(
    ("rollouts", "disagree"),
    [
        ([keyed(1, 0, "Question 1?"), keyed(0, 0, "Question 0?")], False),
        ([keyed(1, 0, "Question 1?"), keyed(0, 0, "Another question?")], True),
        ([keyed(9, 0, "Not among the inputs?")], False),  # the join says what is wrong with it
        ([{"not": "a rollout"}], False),
    ],
)
def test_the_first_rows_are_compared_before_any_server_starts(
    tmp_path: Path, rollouts: list[dict[str, Any]], disagree: bool
) -> None:
    inputs = write(tmp_path / "inputs.jsonl", [keyed(task, 0, f"Question {task}?") for task in range(3)])
    assert first_rows_disagree(inputs, write(tmp_path / "rollouts.jsonl", rollouts)) is disagree


def test_the_first_rows_compared_are_those_a_limit_keeps(tmp_path: Path) -> None:
    inputs = write(tmp_path / "inputs.jsonl", [keyed(task, 0, f"Question {task}?") for task in range(3)])
    rollouts = write(tmp_path / "rollouts.jsonl", [keyed(0, 0, "Question 0?"), keyed(1, 0, "Another?")])
    assert first_rows_disagree(inputs, rollouts) and not first_rows_disagree(inputs, rollouts, limit=1)


@pytest.mark.parametrize("run", NEMO_GYM_RUNS, ids=lambda path: path.name)
def test_the_first_rows_of_runs_nemo_gym_wrote_agree(run: Path) -> None:
    assert not first_rows_disagree(run / "rollouts_materialized_inputs.jsonl", run / "rollouts.jsonl")
