"""Through the real CLI: one writer per output, sources never written, and NeMo Gym's own outputs resumed."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from reverify_assets.files.names import lock_path
from tests.support.cli import (
    MCQA_CONFIG,
    ROOT,
    fake_dataset,
    read_jsonl,
    run_args,
    run_reverify,
    run_with_config,
    start_piped,
    url_config,
)
from tests.support.fake_verifier import FakeVerifier
from tests.support.waiting import CLI_LIMIT_S, HeldAggregation, wait_for

NEMO_GYM_MCQA = ROOT / "tests" / "data" / "nemo_gym_servers" / "mcqa"


@pytest.mark.parametrize("phase", ["verify", "aggregation"])
def test_overwrite_of_an_output_a_live_run_writes_is_refused_naming_its_pid(tmp_path: Path, phase: str) -> None:
    inputs, rollouts = fake_dataset(tmp_path, ["ok", "wrong"] * 10)
    output = tmp_path / "out" / "o.jsonl"
    with HeldAggregation(latency_s=0.5 if phase == "verify" else 0.0) as server:
        config = url_config(tmp_path, server.url)
        first = start_piped(*run_args(config, inputs, rollouts, output), home=tmp_path / "h1")
        try:
            if phase == "verify":
                wait_for(lambda: server.stats.verify_calls > 0, "verified a row", first)
            else:
                wait_for(server.aggregating.is_set, "reached its aggregation", first)
            second = run_reverify(
                *run_args(config, inputs, rollouts, output, "--overwrite"), home=tmp_path / "h2", timeout=CLI_LIMIT_S
            )
            assert second.returncode == 1, second.stderr
            assert f"another run with PID {first.pid} is writing {output}" in second.stderr
            assert "Traceback" not in second.stderr
        finally:
            server.release.set()
            out, err = first.communicate(timeout=CLI_LIMIT_S)
    assert first.returncode == 0, err
    assert "Mean reward: 0.5000" in out
    assert len(read_jsonl(output)) == 40
    assert not lock_path(output).exists()


@pytest.mark.parametrize(
    ("source", "written", "flags"),
    [
        ("rollouts", "o_failures.jsonl", ("--overwrite",)),
        ("inputs", "o_aggregate_metrics.json", ("--overwrite",)),
        ("rollouts", "o_failures.jsonl", ("--resume",)),
        ("inputs", "o.jsonl", ()),
    ],
)
def test_a_source_the_run_would_write_is_refused_before_anything_starts(
    tmp_path: Path, source: str, written: str, flags: tuple[str, ...]
) -> None:
    (tmp_path / "data").mkdir()
    inputs, rollouts = fake_dataset(tmp_path / "data", ["ok"] * 3)
    out = tmp_path / "out"
    out.mkdir()
    target = out / written
    shutil.move(inputs if source == "inputs" else rollouts, target)
    inputs, rollouts = (target, rollouts) if source == "inputs" else (inputs, target)
    before = target.read_bytes()
    with FakeVerifier() as server:
        result = run_with_config(
            url_config(tmp_path, server.url), inputs, rollouts, out / "o.jsonl", *flags, home=tmp_path / "h"
        )
        assert server.stats.verify_calls == 0
    assert result.returncode == 1, result.stderr
    assert f"is the same file as --{source} {target}" in result.stderr
    assert "Traceback" not in result.stderr
    assert target.read_bytes() == before
    assert sorted(path.name for path in out.iterdir()) == [written]


def test_resume_over_an_output_nemo_gym_wrote_finishes_it_and_says_the_grader_is_unknown(tmp_path: Path) -> None:
    output = tmp_path / "out.jsonl"
    written_by_nemo_gym = (NEMO_GYM_MCQA / "expected" / "out.jsonl").read_bytes().splitlines(keepends=True)
    torn = written_by_nemo_gym[3][:40]  # gym eval reverify interrupted while writing its fourth row
    output.write_bytes(b"".join(written_by_nemo_gym[:3]) + torn)
    (tmp_path / "out_failures.jsonl").write_bytes(b"")
    inputs, rollouts = NEMO_GYM_MCQA / "rollouts_materialized_inputs.jsonl", NEMO_GYM_MCQA / "rollouts.jsonl"
    result = run_with_config(MCQA_CONFIG, inputs, rollouts, output, "--resume", home=tmp_path / "h")
    assert result.returncode == 0, result.stderr
    assert "3 rows without reverify_provenance" in result.stderr
    assert "the grader of those rows is unknown" in result.stderr
    rows = read_jsonl(output)
    assert len(rows) == 5
    assert [row.get("reverify_provenance") is None for row in rows].count(True) == 3
    metrics = orjson.loads((tmp_path / "out_aggregate_metrics.json").read_bytes())
    provenance = next(entry["provenance"] for entry in metrics if "provenance" in entry)
    assert provenance["rows_by_config"]["original"] == 3 and provenance["mixed"] is True


def test_a_refused_resume_leaves_the_torn_output_as_it_was(tmp_path: Path) -> None:
    output = tmp_path / "out.jsonl"
    inputs, rollouts = NEMO_GYM_MCQA / "rollouts_materialized_inputs.jsonl", NEMO_GYM_MCQA / "rollouts.jsonl"
    lenient = "++mcqa.resources_servers.mcqa.grading_mode=lenient_boxed"
    assert run_with_config(MCQA_CONFIG, inputs, rollouts, output, lenient, home=tmp_path / "h").returncode == 0
    output.write_bytes(output.read_bytes()[:-30])  # an interrupted write: a torn last line
    before = output.read_bytes()
    result = run_with_config(MCQA_CONFIG, inputs, rollouts, output, "--resume", home=tmp_path / "h")
    assert result.returncode == 1, result.stderr
    assert "holds rows scored by other verifier configs" in result.stderr
    assert output.read_bytes() == before


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda path: os.mkfifo(path), "is a FIFO (named pipe)"),
        (lambda path: (path.symlink_to(path.with_name("b")), path.with_name("b").symlink_to(path)), "symbolic links"),
        (lambda path: path.symlink_to("/proc/self/mem"), "cannot be read: Input/output error"),
    ],
)
def test_an_unreadable_source_is_named_before_anything_starts(tmp_path: Path, make: Callable, message: str) -> None:
    inputs, _ = fake_dataset(tmp_path, ["ok"])
    rollouts = tmp_path / "unreadable.jsonl"
    make(rollouts)
    with FakeVerifier() as server:
        result = run_with_config(
            url_config(tmp_path, server.url), inputs, rollouts, tmp_path / "out" / "o.jsonl", home=tmp_path / "h"
        )
    assert result.returncode == 1, result.stderr
    assert f"--rollouts file {rollouts}" in result.stderr or f"--rollouts {rollouts}" in result.stderr
    assert message in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


def test_judge_recovery_carries_over_rows_without_a_response(tmp_path: Path) -> None:
    """Carried-over successes are never re-verified: they need no response (NeMo Gym's rows may lack one)."""
    inputs, rollouts = fake_dataset(tmp_path, ["ok", "judge", "wrong", "judge"])
    first = tmp_path / "run1" / "rollouts.jsonl"
    with FakeVerifier() as server:
        config = url_config(tmp_path, server.url)
        server.judge_down = True
        assert run_with_config(config, inputs, rollouts, first, home=tmp_path / "h").returncode == 0
        server.judge_down = False
        rows = read_jsonl(first)
        del rows[0]["response"]
        first.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))
        for _ in range(2):
            flags = ("--judge-failed-only", "--append")
            result = run_with_config(config, inputs, first, first, *flags, home=tmp_path / "h")
            assert result.returncode == 0, result.stderr
        merged = tmp_path / "merged.jsonl"
        result = run_with_config(config, inputs, first, merged, "--judge-failed-only", "--resume", home=tmp_path / "h")
        assert result.returncode == 0, result.stderr
    assert len(read_jsonl(first)) == len(read_jsonl(merged)) == 8
