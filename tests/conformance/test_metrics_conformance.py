"""Our mcqa ``/aggregate_metrics`` answer against NeMo Gym 0.7.0's metrics files for the 180-row set.

For each mode of ``expected_by_mode.jsonl`` we build what NeMo Gym's reverify POSTs (contract 2.5, 2.6
and 9): the reverified rows sorted by key, each the rollout row with that mode's ``reward`` and
``extracted_answer``, ``responses_create_params`` dropped and ``response`` stripped to ``{usage}``.
The rollout's own ``_ng_environment_server`` / ``_ng_result_type`` stamps are not in a reverified row
(nor would they count: fields starting with ``_`` are not metrics).

Each ``expected_aggregate_metrics_<mode>.json`` entry is the server's answer plus what the CLI adds:
the CLI writes ``agent_ref`` (the run label) and leaves out the server's ``perf_summary``; the shared
copy keeps only the first three ``group_level_metrics`` entries. So the comparison is of the server part.
"""

from __future__ import annotations

import json
import math
import shutil
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from reverify_assets.metrics import aggregate_metrics, mcqa

DATA_DIR = Path(__file__).resolve().parents[1] / "data" / "conformance" / "mcqa"
SHARED_DIR = Path(__file__).resolve().parents[3] / "shared" / "conformance" / "mcqa"
MODES = (
    "row_default",
    "strict_single_letter_boxed",
    "lenient_boxed",
    "lenient_answer_colon",
    "lenient_answer_colon_md",
)
DROPPED_FIELDS = ("responses_create_params", "_ng_environment_server", "_ng_result_type")
CLI_FIELDS = ("agent_ref",)
KEPT_GROUPS = 3
REL_TOL = 1e-9


def _data_file(name: str) -> Path:
    path = DATA_DIR / name
    if not path.exists() and (SHARED_DIR / name).exists():  # the copy into tests/data may not be there yet
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(SHARED_DIR / name, path)
    return path


def _jsonl(name: str) -> list[dict[str, Any]]:
    with _data_file(name).open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


@cache
def _rollouts() -> list[dict[str, Any]]:
    return sorted(_jsonl("rollouts.jsonl"), key=lambda row: (row["_ng_task_index"], row["_ng_rollout_index"]))


@cache
def _by_mode() -> dict[tuple[int, int], dict[str, Any]]:
    return {(row["_ng_task_index"], row["_ng_rollout_index"]): row for row in _jsonl("expected_by_mode.jsonl")}


def verify_responses(mode: str) -> list[dict[str, Any]]:
    """The stripped verify responses NeMo Gym's reverify sends to ``/aggregate_metrics`` for `mode`."""
    rows = []
    for rollout in _rollouts():
        graded = _by_mode()[(rollout["_ng_task_index"], rollout["_ng_rollout_index"])][mode]
        row = {name: value for name, value in rollout.items() if name not in DROPPED_FIELDS}
        row["response"] = {"usage": rollout["response"].get("usage")}
        row["reward"] = graded["reward"]
        row["extracted_answer"] = graded["extracted_answer"]
        rows.append(row)
    return rows


@cache
def _answer(mode: str) -> dict[str, Any]:
    return aggregate_metrics(
        verify_responses(mode), compute_metrics=mcqa.compute_metrics, get_key_metrics=mcqa.get_key_metrics
    )


def _expected(mode: str) -> dict[str, Any]:
    with _data_file(f"expected_aggregate_metrics_{mode}.json").open(encoding="utf-8") as handle:
        (entry,) = json.load(handle)
    return entry


def assert_same(actual: Any, expected: Any, path: str = "") -> None:
    """Equal JSON values: same keys in the same order, same types, floats within REL_TOL."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict), path
        assert list(actual) == list(expected), path
        for key, value in expected.items():
            assert_same(actual[key], value, f"{path}/{key}")
    elif isinstance(expected, list):
        assert isinstance(actual, list) and len(actual) == len(expected), path
        for index, (item, expected_item) in enumerate(zip(actual, expected, strict=True)):
            assert_same(item, expected_item, f"{path}[{index}]")
    elif isinstance(expected, float):
        assert type(actual) is float, f"{path}: {actual!r} is not a float"
        assert math.isclose(actual, expected, rel_tol=REL_TOL, abs_tol=1e-12), f"{path}: {actual} != {expected}"
    else:
        assert type(actual) is type(expected) and actual == expected, f"{path}: {actual!r} != {expected!r}"


def test_the_data_is_there() -> None:
    assert len(_rollouts()) == 180
    assert len(_by_mode()) == 180


@pytest.mark.parametrize("mode", MODES)
def test_payload_is_stripped(mode: str) -> None:
    rows = verify_responses(mode)
    keys = [(row["_ng_task_index"], row["_ng_rollout_index"]) for row in rows]
    assert keys == sorted(keys)
    assert all("responses_create_params" not in row and list(row["response"]) == ["usage"] for row in rows)


@pytest.mark.parametrize("mode", MODES)
def test_entry_is_the_server_answer_plus_the_cli_fields(mode: str) -> None:
    expected = _expected(mode)
    server_fields = [name for name in expected if name not in CLI_FIELDS]
    assert set(server_fields) <= set(_answer(mode))
    assert _answer(mode)["perf_summary"] is None  # the CLI leaves it out of the file


@pytest.mark.parametrize("section", ["agent_metrics", "key_metrics", "repeat_level_metrics"])
@pytest.mark.parametrize("mode", MODES)
def test_section_matches_nemo_gym(mode: str, section: str) -> None:
    assert_same(_answer(mode)[section], _expected(mode)[section], section)


@pytest.mark.parametrize("mode", MODES)
def test_first_group_entries_match_nemo_gym(mode: str) -> None:
    groups = _answer(mode)["group_level_metrics"]
    assert len(groups) == 60
    assert_same(groups[:KEPT_GROUPS], _expected(mode)["group_level_metrics"], "group_level_metrics")
