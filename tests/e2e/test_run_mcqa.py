"""``reverify run`` with the built-in mcqa server on NeMo Gym's own conformance set, and its bad-input errors."""

from __future__ import annotations

import math
import subprocess
import time
from pathlib import Path

import orjson
import pytest

from tests.support.cli import (
    CLI_LIMIT_S,
    CONFORMANCE,
    CONFORMANCE_INPUTS,
    CONFORMANCE_ROLLOUTS,
    MCQA_CONFIG,
    read_jsonl,
    row_key,
    row_keys,
    run_args,
    run_mcqa,
    start_piped,
    write_jsonl,
)

MODES = ["strict_single_letter_boxed", "lenient_boxed", "lenient_answer_colon", "lenient_answer_colon_md"]


def expected_by_key(mode: str) -> dict[tuple[int, int], dict]:
    return {row_key(r): r[mode] for r in read_jsonl(CONFORMANCE / "expected_by_mode.jsonl")}


def run_mode(tmp_path: Path, mode: str | None) -> tuple[subprocess.CompletedProcess[str], Path]:
    output = tmp_path / f"{mode or 'row_default'}.jsonl"
    overrides = [f"++mcqa.resources_servers.mcqa.grading_mode={mode}"] if mode else []
    return run_mcqa(output, *overrides, home=tmp_path / "dagster_home"), output


def assert_matches_nemo_gym(output: Path, column: str) -> None:
    expected = expected_by_key(column)
    rows = read_jsonl(output)
    assert len(rows) == 180
    mismatches = [
        (key, row["reward"], row["extracted_answer"], expected[key])
        for row in rows
        if (key := row_key(row))
        and (row["reward"], row["extracted_answer"]) != (expected[key]["reward"], expected[key]["extracted_answer"])
    ]
    assert not mismatches, mismatches[:5]
    metrics = orjson.loads(output.with_name(f"{output.stem}_aggregate_metrics.json").read_bytes())
    nemo = orjson.loads((CONFORMANCE / f"expected_aggregate_metrics_{column}.json").read_bytes())
    assert [e["agent_ref"] for e in metrics] == [{"name": "mcqa_simple_agent"}]
    for section in ("agent_metrics", "key_metrics"):
        ours, theirs = metrics[0][section], nemo[0][section]
        assert set(ours) == set(theirs), section
        for name, value in theirs.items():
            if isinstance(value, float):
                assert math.isclose(ours[name], value, rel_tol=1e-9, abs_tol=1e-12), (section, name)


def test_lenient_boxed_run_matches_nemo_gym_row_for_row(tmp_path: Path) -> None:
    result, output = run_mode(tmp_path, "lenient_boxed")
    assert result.returncode == 0, result.stderr
    assert_matches_nemo_gym(output, "lenient_boxed")
    rows = read_jsonl(output)
    keys = row_keys(rows)
    assert keys == sorted(keys), "a fresh run writes its output sorted by key"
    assert list(rows[0]) == [
        "responses_create_params",
        "response",
        "reward",
        "mask_sample",
        "failure_kind",
        "failure_reason",
        "expected_answer",
        "extracted_answer",
        "_ng_task_index",
        "_ng_rollout_index",
        "agent_ref",
        "reverify_provenance",  # ours, last, outside NeMo Gym's `_ng_` namespace
    ]
    assert rows[0]["reverify_provenance"] == {
        "config_hash": rows[0]["reverify_provenance"]["config_hash"],
        "server": "mcqa",
        "type": "mcqa",
        "reverify_mode": "stateless",
    }
    assert (tmp_path / "lenient_boxed_failures.jsonl").read_bytes() == b""
    assert "Mean reward: 0.4500" in result.stdout


@pytest.mark.slow
@pytest.mark.parametrize("mode", [*[m for m in MODES if m != "lenient_boxed"], None])
def test_every_grading_mode_matches_nemo_gym(tmp_path: Path, mode: str | None) -> None:
    result, output = run_mode(tmp_path, mode)
    assert result.returncode == 0, result.stderr
    assert_matches_nemo_gym(output, mode or "row_default")


@pytest.mark.slow
def test_two_fresh_runs_are_byte_identical_and_existing_output_is_protected(tmp_path: Path) -> None:
    first, output = run_mode(tmp_path, None)
    assert first.returncode == 0, first.stderr
    snapshot = output.read_bytes()
    refused, _ = run_mode(tmp_path, None)
    assert refused.returncode == 1
    assert f"Output file already exists: '{output}'. Pass --overwrite" in refused.stderr
    assert output.read_bytes() == snapshot
    again = run_mcqa(output, "--overwrite", home=tmp_path / "dagster_home")
    assert again.returncode == 0, again.stderr
    assert output.read_bytes() == snapshot


@pytest.mark.slow
def test_limit_verifies_the_first_rows_of_the_rollouts_file(tmp_path: Path) -> None:
    output = tmp_path / "limited.jsonl"
    result = run_mcqa(output, "--limit", "10", home=tmp_path / "h")
    assert result.returncode == 0, result.stderr
    first_ten = set(row_keys(read_jsonl(CONFORMANCE_ROLLOUTS)[:10]))
    assert set(row_keys(read_jsonl(output))) == first_ten


def broken_copy(tmp_path: Path, which: str, mutate) -> tuple[Path, Path]:
    inputs, rollouts = read_jsonl(CONFORMANCE_INPUTS), read_jsonl(CONFORMANCE_ROLLOUTS)
    lines = [orjson.dumps(r).decode() for r in (inputs if which == "inputs" else rollouts)]
    mutate(lines)
    target = tmp_path / ("inputs.jsonl" if which == "inputs" else "rollouts.jsonl")
    target.write_text("".join(line + "\n" for line in lines))
    if which == "inputs":
        return target, write_jsonl(tmp_path / "rollouts.jsonl", rollouts)
    return write_jsonl(tmp_path / "inputs.jsonl", inputs), target


def _drop_response(lines: list[str]) -> None:
    row = orjson.loads(lines[4])
    del row["response"]
    lines[4] = orjson.dumps(row).decode()


@pytest.mark.parametrize(
    ("which", "mutate", "message"),
    [
        ("rollouts", lambda lines: lines.insert(3, ""), r"rollouts.jsonl:4: blank line"),
        ("inputs", lambda lines: lines.__setitem__(7, lines[7][:-5]), r"inputs.jsonl:8: malformed JSON"),
        (
            "inputs",
            lambda lines: lines.append(lines[2]),
            r"inputs.jsonl: duplicate key \(task 0, rollout 2\) at lines 3, 181",
        ),
        ("rollouts", lambda lines: lines.append(lines[0]), r"rollouts.jsonl: duplicate key \(task 44, rollout 0\)"),
        ("inputs", lambda lines: lines.pop(0), r"has no matching row in the materialized inputs"),
        (
            "rollouts",
            _drop_response,
            r"rollouts.jsonl:5: rollout \(task \d+, rollout \d\) of result type 'legacy_agent' has no `response`",
        ),
    ],
)
def test_bad_input_is_reported_before_anything_starts(tmp_path: Path, which: str, mutate, message: str) -> None:
    inputs, rollouts = broken_copy(tmp_path, which, mutate)
    output = tmp_path / "out" / "rs.jsonl"
    started = time.monotonic()
    result = run_mcqa(output, inputs=inputs, rollouts=rollouts, home=tmp_path / "h")
    assert result.returncode == 1, result.stderr
    import re

    assert re.search(message, result.stderr), result.stderr
    assert "Traceback" not in result.stderr
    assert not output.parent.exists(), "no output file may exist after a data error"
    assert time.monotonic() - started < 30


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--limit", "0"], 2, "--limit must be a positive number"),
        (["--concurrency", "x"], 2, "invalid int value"),
        (["--bogus"], 2, "unrecognized arguments: --bogus"),
        (["++mcqa.resources_servers.mcqa.grading_mode=fuzzy"], 1, "mcqa.resources_servers.mcqa.grading_mode"),
    ],
)
def test_flag_and_config_errors(tmp_path: Path, args: list[str], code: int, message: str) -> None:
    result = run_mcqa(tmp_path / "rs.jsonl", *args, home=tmp_path / "h")
    assert result.returncode == code, result.stderr
    assert message in result.stderr


@pytest.mark.slow
def test_runs_started_together_on_a_new_dagster_home_both_finish(tmp_path: Path) -> None:
    """The first opening of a home creates Dagster's storage: two runs doing it at once used to collide on its
    tables (``table secondary_indexes already exists``)."""
    home = tmp_path / "new_home"
    outputs = [tmp_path / f"o{index}.jsonl" for index in range(3)]
    runs = [
        start_piped(*run_args(MCQA_CONFIG, CONFORMANCE_INPUTS, CONFORMANCE_ROLLOUTS, output), home=home)
        for output in outputs
    ]
    for process in runs:
        _, stderr = process.communicate(timeout=CLI_LIMIT_S)
        assert process.returncode == 0, stderr
    assert all(len(read_jsonl(output)) == 180 for output in outputs)
