"""``reverify run`` end to end against small test servers on loopback: guard, routing of results, retries."""

from __future__ import annotations

import math
import re
import shlex
from pathlib import Path

import orjson
import pytest

from tests.support.cli import fake_dataset, read_jsonl, row_keys, run_against, run_reverify
from tests.support.fake_verifier import FakeVerifier

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("mode", ["unknown", "unsupported"])
def test_guard_refuses_servers_not_declared_stateless(tmp_path: Path, mode: str) -> None:
    inputs, rollouts = fake_dataset(tmp_path, ["ok"])
    with FakeVerifier(reverify_mode=mode) as server:
        result = run_against(tmp_path, server, inputs, rollouts, tmp_path / "out" / "rs.jsonl")
        assert server.stats.verify_calls == 0
    assert result.returncode == 1, result.stderr
    assert "Resource server(s) ['fake'] have reverify_mode=UNSUPPORTED or UNKNOWN" in result.stderr
    assert not (tmp_path / "out" / "rs.jsonl").exists() and not (tmp_path / "out" / "rs_failures.jsonl").exists()


def test_force_writes_unsafe_files_and_warns_at_start_and_end(tmp_path: Path) -> None:
    inputs, rollouts = fake_dataset(tmp_path, ["ok", "wrong"])
    with FakeVerifier(reverify_mode="unknown") as server:
        result = run_against(tmp_path, server, inputs, rollouts, tmp_path / "rs.jsonl", "--force")
    assert result.returncode == 0, result.stderr
    assert "WARNING" in result.stderr and "WARNING" in result.stdout
    assert sorted(p.name for p in tmp_path.glob("unsafe_*")) == [
        "unsafe_rs.jsonl",
        "unsafe_rs_aggregate_metrics.json",
        "unsafe_rs_failures.jsonl",
    ]
    assert not (tmp_path / "rs.jsonl").exists()


def test_results_go_to_output_sidecar_or_nowhere(tmp_path: Path) -> None:
    inputs, rollouts = fake_dataset(tmp_path, ["ok", "judge_failed", "no_persist", "http422", "wrong", "flaky"])
    output = tmp_path / "rs.jsonl"
    with FakeVerifier() as server:
        result = run_against(tmp_path, server, inputs, rollouts, output)
        attempts = server.stats.attempts_by_key
    assert result.returncode == 0, result.stderr
    main = read_jsonl(output)
    assert row_keys(main) == [(0, 0), (0, 1), (4, 0), (4, 1), (5, 0), (5, 1)]  # sorted, flaky rows recovered
    assert [r["reward"] for r in main] == [1.0, 1.0, 0.0, 0.0, 1.0, 1.0]
    assert all(r["agent_ref"]["name"] == "agent_a" for r in main)
    sidecar = read_jsonl(tmp_path / "rs_failures.jsonl")
    assert row_keys(sidecar) == [(1, 0), (1, 1), (3, 0), (3, 1)]
    assert [r["_ng_failure_class"] for r in sidecar] == ["judge_failed"] * 2 + ["verify_failed"] * 2
    assert (
        "HTTP 422" in sidecar[2]["_ng_failure_message"] and "grading_mode 'nope'" in sidecar[2]["_ng_failure_message"]
    )
    assert attempts[(3, 0)] == 1, "a 4xx other than 408/429 is not retried"
    assert attempts[(5, 0)] == 2, "a 500 is retried"
    metrics = orjson.loads((tmp_path / "rs_aggregate_metrics.json").read_bytes())
    assert [(e["agent_ref"], e["agent_metrics"]["rows_seen"]) for e in metrics] == [({"name": "agent_a"}, 6)]
    # The metrics say what they lack: the sidecar's keys as failed, the no_persist rows (in no file) as missing.
    coverage = metrics[0]["coverage"]
    assert {name: coverage[name] for name in ("expected", "scored", "failed", "failed_by_class", "missing")} == {
        "expected": 12,
        "scored": 6,
        "failed": 4,
        "failed_by_class": {"judge_failed": 2, "verify_failed": 2},
        "missing": 2,
    }
    assert coverage["complete"] is False
    assert (coverage["mean_reward_lower"], coverage["mean_reward_upper"]) == (4 / 12, 10 / 12)
    assert "Metrics cover 6 of 12 rollouts (2 judge_failed, 2 verify_failed, 2 missing): incomplete" in result.stdout


def test_a_server_that_keeps_failing_does_not_kill_the_run(tmp_path: Path) -> None:
    inputs, rollouts = fake_dataset(tmp_path, ["http500", "ok"])
    with FakeVerifier() as server:
        result = run_against(tmp_path, server, inputs, rollouts, tmp_path / "rs.jsonl")
        assert server.stats.attempts_by_key[(0, 0)] == 4
    assert result.returncode == 0, result.stderr
    assert row_keys(read_jsonl(tmp_path / "rs.jsonl")) == [(1, 0), (1, 1)]
    failed = read_jsonl(tmp_path / "rs_failures.jsonl")
    assert [r["_ng_failure_message"] for r in failed] == ["HTTP 500: internal error (after 4 attempts)"] * 2
    assert "response" in failed[0], "the failure row keeps the response so a later run can retry it"


def test_concurrency_bounds_requests_in_flight(tmp_path: Path) -> None:
    inputs, rollouts = fake_dataset(tmp_path, ["ok"] * 20)
    with FakeVerifier(latency_s=0.05) as server:
        result = run_against(tmp_path, server, inputs, rollouts, tmp_path / "rs.jsonl", "--concurrency", "3")
        assert server.stats.max_in_flight == 3
        assert server.stats.verify_calls == 40
    assert result.returncode == 0, result.stderr


def test_server_without_aggregate_route_gets_our_baseline_metrics(tmp_path: Path) -> None:
    inputs, rollouts = fake_dataset(tmp_path, ["ok", "wrong"])
    with FakeVerifier(aggregate=False) as server:
        result = run_against(tmp_path, server, inputs, rollouts, tmp_path / "rs.jsonl")
    assert result.returncode == 0, result.stderr
    [entry] = orjson.loads((tmp_path / "rs_aggregate_metrics.json").read_bytes())
    assert entry["agent_ref"] == {"name": "agent_a"}
    assert entry["agent_metrics"]["mean/reward"] == 0.5
    assert len(entry["group_level_metrics"]) == 2


def test_disable_aggregation_writes_no_metrics(tmp_path: Path) -> None:
    inputs, rollouts = fake_dataset(tmp_path, ["ok"])
    with FakeVerifier() as server:
        result = run_against(tmp_path, server, inputs, rollouts, tmp_path / "rs.jsonl", "--disable-aggregation")
        assert server.stats.aggregate_calls == 0
    assert result.returncode == 0, result.stderr
    assert "reverify aggregate" in result.stdout
    assert not (tmp_path / "rs_aggregate_metrics.json").exists()


def test_a_failing_aggregate_route_is_retried_with_the_whole_body(tmp_path: Path) -> None:
    inputs, rollouts = fake_dataset(tmp_path, ["ok", "wrong", "http422"])
    with FakeVerifier(aggregate_failures=2) as server:
        result = run_against(tmp_path, server, inputs, rollouts, tmp_path / "rs.jsonl")
        assert server.stats.aggregate_calls == 3
    assert result.returncode == 0, result.stderr
    [entry] = orjson.loads((tmp_path / "rs_aggregate_metrics.json").read_bytes())
    assert entry["agent_metrics"] == {"mean/reward": 0.5, "rows_seen": 4}, "each attempt sent every row"


def test_an_aggregate_route_that_keeps_failing_keeps_the_rows_and_says_how_to_finish(tmp_path: Path) -> None:
    inputs, rollouts = fake_dataset(tmp_path, ["ok", "wrong", "http422"])
    output = tmp_path / "out" / "rs.jsonl"
    with FakeVerifier(aggregate_failures=math.inf) as server:
        result = run_against(tmp_path, server, inputs, rollouts, output)
        assert server.stats.aggregate_calls == 4
        assert result.returncode == 1, result.stderr
        assert "Traceback" not in result.stderr
        [message] = [line for line in result.stderr.splitlines() if line.startswith("reverify: error:")]
        for said in (
            f"resources server 'fake' gave no aggregate metrics: POST {server.url}/aggregate_metrics",
            "HTTP 503: aggregation unavailable: the server is restarting (after 4 attempts)",
            f"Every verified row is kept: 4 rows in {output}, the failures in {tmp_path / 'out' / 'rs_failures.jsonl'}",
        ):
            assert said in message
        assert row_keys(read_jsonl(output)) == [(0, 0), (0, 1), (1, 0), (1, 1)]
        assert row_keys(read_jsonl(tmp_path / "out" / "rs_failures.jsonl")) == [(2, 0), (2, 1)]
        assert not (tmp_path / "out" / "rs_aggregate_metrics.json").exists()
        rows_before = output.read_bytes()

        server.aggregate_failures = 0  # the server is back: the command the message gave finishes the run
        found = re.search(r"finish the run with: (reverify aggregate .*)$", message)
        assert found is not None, message
        command = shlex.split(found.group(1))
        finished = run_reverify(*command[1:], home=tmp_path / "h")
    assert finished.returncode == 0, finished.stderr
    [entry] = orjson.loads((tmp_path / "out" / "rs_aggregate_metrics.json").read_bytes())
    assert entry["agent_metrics"] == {"mean/reward": 0.5, "rows_seen": 4}
    assert entry["coverage"]["failed_by_class"] == {"verify_failed": 2}
    assert output.read_bytes() == rows_before, "the output is aggregated where it is, never rewritten"
