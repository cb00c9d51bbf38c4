"""``--resume``, ``--judge-failed-only`` / ``--append`` and crash safety, with the real CLI on loopback."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import dagster as dg
import orjson
import pytest

from reverify_assets.defs.assets import merged_rollouts
from tests.support.cli import (
    CLI_LIMIT_S,
    MCQA_CONFIG,
    fake_dataset,
    read_jsonl,
    row_key,
    row_keys,
    run_against,
    run_args,
    run_with_config,
    start_reverify,
    url_config,
)
from tests.support.fake_verifier import FakeVerifier
from tests.support.instance import latest_check, latest_materialization, open_instance
from tests.support.process_tree import ProcessInfo, descendants, kill_all, survivors
from tests.support.waiting import wait_for

pytestmark = pytest.mark.slow


def by_key(rows: list[dict]) -> dict[tuple[int, int], float]:
    keys = row_keys(rows)
    assert len(keys) == len(set(keys)), "a key appears twice"
    return {k: r["reward"] for k, r in zip(keys, rows, strict=True)}


def test_resume_finishes_a_partial_run_and_aggregates_everything(tmp_path: Path) -> None:
    inputs, rollouts = fake_dataset(tmp_path, ["ok", "wrong", "ok", "wrong", "ok"])
    clean, partial = tmp_path / "clean.jsonl", tmp_path / "partial.jsonl"
    with FakeVerifier() as server:
        assert run_against(tmp_path, server, inputs, rollouts, clean).returncode == 0
        full = clean.read_bytes().splitlines(keepends=True)
        # A run that died after 4 rows, mid-way through the fifth.
        partial.write_bytes(b"".join(full[:4]) + full[4][:30])
        (tmp_path / "partial_failures.jsonl").write_bytes(b"")
        calls_before = server.stats.verify_calls
        result = run_against(tmp_path, server, inputs, rollouts, partial, "--resume", "--overwrite")
        assert server.stats.verify_calls - calls_before == 6, "only the 6 missing rows are verified again"
    assert result.returncode == 0, result.stderr
    assert "dropped an incomplete last line" in result.stderr
    assert "  4 rows already in the output" in result.stderr and "  6 rows that still need to be run" in result.stderr
    assert by_key(read_jsonl(partial)) == by_key(read_jsonl(clean))
    [entry] = orjson.loads((tmp_path / "partial_aggregate_metrics.json").read_bytes())
    assert entry["agent_metrics"]["rows_seen"] == 10, "the aggregate covers cached rows too"


def test_resume_with_another_grading_config_is_refused_unless_allowed(tmp_path: Path) -> None:
    samples = MCQA_CONFIG.parent.parent / "samples" / "mcqa"
    inputs, rollouts = samples / "rollouts_materialized_inputs.jsonl", samples / "rollouts.jsonl"
    output, home = tmp_path / "o.jsonl", tmp_path / "h"
    strict, lenient = (
        f"++mcqa.resources_servers.mcqa.grading_mode={mode}" for mode in ("strict_single_letter_boxed", "lenient_boxed")
    )
    begun = run_with_config(MCQA_CONFIG, inputs, rollouts, output, "--limit", "40", strict, home=home)
    assert begun.returncode == 0, begun.stderr
    before = output.read_bytes()

    refused = run_with_config(MCQA_CONFIG, inputs, rollouts, output, "--resume", lenient, home=home)
    assert refused.returncode == 1
    assert "holds rows scored by other verifier configs" in refused.stderr and "(40 rows)" in refused.stderr
    assert "--allow-mixed-configs" in refused.stderr
    assert output.read_bytes() == before, "a refused resume leaves the output as it was"

    allowed = run_with_config(
        MCQA_CONFIG, inputs, rollouts, output, "--resume", "--allow-mixed-configs", lenient, home=home
    )
    assert allowed.returncode == 0, allowed.stderr
    assert "continuing because --allow-mixed-configs was given" in allowed.stderr
    rows = read_jsonl(output)
    configs = {row["reverify_provenance"]["config_hash"] for row in rows}
    assert len(rows) == 300 and len(configs) == 2
    [entry] = orjson.loads(output.with_name("o_aggregate_metrics.json").read_bytes())
    assert entry["provenance"]["mixed"] is True


def test_resume_without_earlier_files_is_a_plain_run(tmp_path: Path) -> None:
    inputs, rollouts = fake_dataset(tmp_path, ["ok"])
    with FakeVerifier() as server:
        result = run_against(tmp_path, server, inputs, rollouts, tmp_path / "o.jsonl", "--resume")
    assert result.returncode == 0, result.stderr
    assert "Skipping resume_from_cache because cache paths don't exist!" in result.stderr
    assert len(read_jsonl(tmp_path / "o.jsonl")) == 2


def test_resume_retries_failures_until_max_attempts(tmp_path: Path) -> None:
    inputs, rollouts = fake_dataset(tmp_path, ["http500", "ok"])
    output = tmp_path / "o.jsonl"
    with FakeVerifier() as server:
        assert run_against(tmp_path, server, inputs, rollouts, output).returncode == 0
        first = server.stats.verify_calls
        assert run_against(tmp_path, server, inputs, rollouts, output, "--resume").returncode == 0
        assert server.stats.verify_calls - first == 8, "2 failed keys x 4 tries each"
        second = server.stats.verify_calls
        assert (
            run_against(tmp_path, server, inputs, rollouts, output, "--resume", "--max-attempts", "2").returncode == 0
        )
        assert server.stats.verify_calls == second, "both keys now have 2 sidecar rows: skipped"
    assert len(read_jsonl(tmp_path / "o_failures.jsonl")) == 4


def test_limit_counts_before_the_resume_filter(tmp_path: Path) -> None:
    inputs, rollouts = fake_dataset(tmp_path, ["ok"] * 5)
    output = tmp_path / "o.jsonl"
    with FakeVerifier() as server:
        assert run_against(tmp_path, server, inputs, rollouts, output, "--limit", "4").returncode == 0
        result = run_against(tmp_path, server, inputs, rollouts, output, "--limit", "6", "--resume")
        assert server.stats.verify_calls == 6
    assert "  4 rows already in the output" in result.stderr and "  2 rows that still need to be run" in result.stderr
    assert len(read_jsonl(output)) == 6


def _kill_when(output: Path, process: subprocess.Popen, lines: int) -> list[ProcessInfo]:
    """SIGKILL the run once its output has ``lines`` lines; what it had started, for the caller to check and reap."""
    wait_for(lambda: output.exists() and output.read_bytes().count(b"\n") >= lines, f"wrote {lines} lines", process)
    tree = descendants(process.pid)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=CLI_LIMIT_S)
    return tree


def test_kill_minus_nine_then_resume_equals_an_uninterrupted_run(tmp_path: Path) -> None:
    behaviours = ["ok", "wrong", "judge", "ok"] * 15  # 120 rows
    inputs, rollouts = fake_dataset(tmp_path, behaviours)
    clean, output = tmp_path / "clean.jsonl", tmp_path / "killed.jsonl"
    # 120 rows, 4 at a time, 50 ms each: a 1.5 s run, long enough to kill at a chosen line.
    with FakeVerifier(latency_s=0.05) as server:
        assert run_against(tmp_path, server, inputs, rollouts, clean, "--concurrency", "4").returncode == 0
        config = url_config(tmp_path, server.url)
        for kill_at, flags in ((10, []), (40, ["--resume"]), (80, ["--resume"])):
            process = start_reverify(
                *run_args(config, inputs, rollouts, output, "--concurrency", "4", *flags),
                home=tmp_path / "h",
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            kill_all(_kill_when(output, process, kill_at))
            content = output.read_bytes()
            assert content.endswith(b"\n"), "a killed run leaves whole lines only"
            assert kill_at <= content.count(b"\n") < 120
        result = run_against(tmp_path, server, inputs, rollouts, output, "--resume", "--concurrency", "4")
    assert result.returncode == 0, result.stderr
    assert by_key(read_jsonl(output)) == by_key(read_jsonl(clean))
    assert (tmp_path / "killed_aggregate_metrics.json").exists()


def test_kill_minus_nine_leaves_no_builtin_server_behind(tmp_path: Path) -> None:
    from reverify_assets.synthetic.mcqa_rollouts import SyntheticSpec, write_mcqa_dataset

    inputs, rollouts = write_mcqa_dataset(tmp_path / "data", SyntheticSpec(tasks=1500, rollouts_per_task=4))
    output = tmp_path / "o.jsonl"
    process = start_reverify(
        *run_args(MCQA_CONFIG, inputs, rollouts, output),
        home=tmp_path / "h",
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    tree = _kill_when(output, process, 1)
    try:
        assert any("reverify_assets.servers.child_process" in child.command for child in tree)
        left = survivors(tree, within=CLI_LIMIT_S)
    finally:
        kill_all(tree)
    assert left == []


def test_ctrl_c_stops_a_busy_run_at_once_keeping_whole_lines_and_resume_finishes_it(tmp_path: Path) -> None:
    from reverify_assets.synthetic.mcqa_rollouts import SyntheticSpec, write_mcqa_dataset

    # Busy enough (the built-in server, thousands of rows a second) that Ctrl-C lands while rows are being read
    # and sent, where Dagster's interrupt once stopped the sender and left the run waiting forever.
    inputs, rollouts = write_mcqa_dataset(tmp_path / "data", SyntheticSpec(tasks=8000, rollouts_per_task=4))
    output = tmp_path / "o.jsonl"
    process = start_reverify(
        *run_args(MCQA_CONFIG, inputs, rollouts, output),
        home=tmp_path / "h",
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_for(lambda: output.exists() and output.stat().st_size > 0, "wrote a row", process)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=CLI_LIMIT_S)
    assert process.returncode == 130 and "reverify: interrupted" in stderr, stderr
    assert "Traceback" not in stderr, "the interrupt was handled, not logged from inside asyncio"
    content = output.read_bytes()
    assert content.endswith(b"\n") and content.count(b"\n") < 32_000, "whole lines, and the run did stop"
    result = run_with_config(MCQA_CONFIG, inputs, rollouts, output, "--resume", home=tmp_path / "h")
    assert result.returncode == 0, result.stderr
    keys = row_keys(read_jsonl(output))
    assert len(keys) == len(set(keys)) == 32_000


def judge_outage_run(tmp_path: Path, server: FakeVerifier) -> tuple[Path, Path, Path]:
    """A first run during a judge outage: its output lacks the judge rows, its sidecar holds them."""
    inputs, rollouts = fake_dataset(tmp_path, ["ok", "judge", "wrong", "judge", "ok"])
    first = tmp_path / "run1" / "rollouts.jsonl"
    server.judge_down = True
    result = run_against(tmp_path, server, inputs, rollouts, first)
    server.judge_down = False
    assert result.returncode == 0, result.stderr
    assert len(read_jsonl(first)) == 6 and len(read_jsonl(first.with_name("rollouts_failures.jsonl"))) == 4
    return inputs, rollouts, first


def test_judge_failed_only_recovers_to_the_clean_result_and_is_idempotent(tmp_path: Path) -> None:
    with FakeVerifier() as server:
        inputs, rollouts, first = judge_outage_run(tmp_path, server)
        server.reverify_mode = "unknown"  # recovery skips the guard; a fresh run needs --force
        clean = tmp_path / "clean.jsonl"
        assert run_against(tmp_path, server, inputs, rollouts, clean, "--force").returncode == 0
        merged = tmp_path / "recovered.jsonl"
        before = server.stats.verify_calls
        result = run_against(tmp_path, server, inputs, first, merged, "--judge-failed-only")
        assert server.stats.verify_calls - before == 4, "only the judge failures are re-judged"
        assert result.returncode == 0, result.stderr
        assert "merges two sources" in result.stderr
        assert "Seeded 6 successes and recovered 4" in result.stdout
        assert by_key(read_jsonl(merged)) == by_key(read_jsonl(tmp_path / "unsafe_clean.jsonl"))
        clean_metrics = orjson.loads((tmp_path / "unsafe_clean_aggregate_metrics.json").read_bytes())
        merged_metrics = orjson.loads((tmp_path / "recovered_aggregate_metrics.json").read_bytes())
        assert [e["agent_metrics"]["mean/reward"] for e in merged_metrics] == [
            e["agent_metrics"]["mean/reward"] for e in clean_metrics
        ]
        assert not list(tmp_path.glob("unsafe_recovered*")), "recovery skips the guard: no unsafe_ prefix"

        # --append onto the run's own rollouts file completes it in place; a second time adds nothing.
        for attempt in range(2):
            before = server.stats.verify_calls
            result = run_against(tmp_path, server, inputs, first, first, "--judge-failed-only", "--append")
            assert result.returncode == 0, result.stderr
            assert server.stats.verify_calls - before == (4 if attempt == 0 else 0)
        assert "Nothing to be re-verified" in result.stderr
        assert by_key(read_jsonl(first)) == by_key(read_jsonl(merged))
        # The sidecar still holds the 4 judge failures, now scored: the appended output is complete.
        [entry] = orjson.loads((tmp_path / "run1" / "rollouts_aggregate_metrics.json").read_bytes())
        assert entry["coverage"]["scored"] == 10 and entry["coverage"]["complete"] is True
        [fresh] = orjson.loads((tmp_path / "recovered_aggregate_metrics.json").read_bytes())
        assert entry["provenance"] == fresh["provenance"], "fresh and --append recoveries count provenance alike"


def test_recovery_errors_come_first(tmp_path: Path) -> None:
    inputs, rollouts = fake_dataset(tmp_path, ["ok"])
    with FakeVerifier() as server:
        missing = run_against(tmp_path, server, inputs, rollouts, tmp_path / "out" / "m.jsonl", "--judge-failed-only")
        alone = run_against(tmp_path, server, inputs, rollouts, tmp_path / "m.jsonl", "--append")
        both = run_against(
            tmp_path, server, inputs, rollouts, tmp_path / "m.jsonl", "--judge-failed-only", "--append", "--overwrite"
        )
        assert server.stats.verify_calls == 0
    assert (
        missing.returncode == 1 and "rollouts_failures.jsonl" in missing.stderr and "does not exist" in missing.stderr
    )
    assert not (tmp_path / "out").exists()
    assert alone.returncode == 2 and "`append` is only valid together with `judge_failed_only`" in alone.stderr
    assert both.returncode == 2 and "`append` and `overwrite` are mutually exclusive" in both.stderr


def test_merge_lineage_and_mixed_provenance_check(tmp_path: Path) -> None:
    with FakeVerifier() as server:
        inputs, _, first = judge_outage_run(tmp_path, server)
        # The recovery's config differs from the first run's by one grading field: a different verifier.
        other = tmp_path / "other.yaml"
        other.write_text(
            f"fake:\n  resources_servers:\n    some_verifier:\n      url: {server.url}\n      strict: true\n"
        )
        result = run_with_config(
            other, inputs, first, tmp_path / "merged.jsonl", "--judge-failed-only", home=tmp_path / "h"
        )
    assert result.returncode == 0, result.stderr
    instance = open_instance(tmp_path / "h")
    metadata, _ = latest_materialization(instance, "merged_rollouts")
    assert merged_rollouts.dependency_keys == {dg.AssetKey("recovered_rows"), dg.AssetKey("rollouts")}
    assert sorted(metadata["rows by verifier config"].values()) == [4, 6]
    assert metadata["rows"] == 10 and metadata["seeded this run"] == 6 and metadata["recovered this run"] == 4
    evaluation = latest_check(instance, "merged_rollouts", "one_verifier_config")
    assert evaluation.passed is False and evaluation.severity == dg.AssetCheckSeverity.WARN
    # The run is not refused (recovery merges two sources by design, with its warning), but its metrics say so.
    assert "merges two sources" in result.stderr
    [entry] = orjson.loads((tmp_path / "merged_aggregate_metrics.json").read_bytes())
    assert sorted(entry["provenance"]["rows_by_config"].values()) == [4, 6] and entry["provenance"]["mixed"] is True
    assert "WARNING: the metrics mix rows scored by 2 verifier configs" in result.stdout
    assert entry["coverage"]["complete"] is True and entry["coverage"]["scored"] == 10


def test_recovery_never_re_judges_a_key_that_later_succeeded(tmp_path: Path) -> None:
    with FakeVerifier() as server:
        inputs, _, first = judge_outage_run(tmp_path, server)
        # A key that failed the judge once and succeeded on a later attempt: in both files.
        success = read_jsonl(first)[0]
        sidecar = first.with_name("rollouts_failures.jsonl")
        with open(sidecar, "ab") as fh:
            fh.write(orjson.dumps({**success, "_ng_failure_class": "judge_failed", "reward": 0.0}) + b"\n")
        before = server.stats.verify_calls
        merged = tmp_path / "merged.jsonl"
        result = run_against(tmp_path, server, inputs, first, merged, "--judge-failed-only")
        assert server.stats.verify_calls - before == 4, "only the 4 keys that never succeeded"
    assert result.returncode == 0, result.stderr
    rows = read_jsonl(merged)
    assert [r for r in rows if row_key(r) == row_key(success)] == [success]
    keys = row_keys(rows)
    assert keys == sorted(keys) and len(keys) == 10, "a fresh recovery output is sorted, every key once"
