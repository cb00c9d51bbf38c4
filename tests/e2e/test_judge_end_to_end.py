"""``reverify run`` with the built-in ``equivalence_judge`` server against the local judge model, end to end.

The local judge model runs as ``reverify judge-serve`` (a subprocess, for the whole module) and is switched
between tests through ``POST /control``; every run is the real CLI in a subprocess. The judge requires the
API key, so a successful run proves the key was sent; no file written and no output printed may contain it.
"""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from tests.support.cli import CLI_LIMIT_S, REVERIFY, read_jsonl, run_reverify
from tests.support.judge_serve import LocalJudge, judge_serve
from tests.support.qa_judge import (
    AGENT,
    JUDGE_KEY_ENV,
    KEY,
    KEY_ENV,
    ROWS,
    Transcript,
    expected_rewards,
    judge_config,
    keys,
    qa_dataset,
    reverify,
)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def transcript() -> Transcript:
    return Transcript()


@pytest.fixture(scope="module")
def judge(tmp_path_factory: pytest.TempPathFactory, transcript: Transcript) -> Iterator[LocalJudge]:
    logs_dir = tmp_path_factory.mktemp("judge_serve")
    transcript.roots.append(logs_dir)
    with judge_serve(logs_dir, "--api-key-env", JUDGE_KEY_ENV, env={JUDGE_KEY_ENV: KEY}) as judge:
        yield judge


@pytest.fixture(autouse=True)
def judge_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)


def test_rewards_come_from_the_judge(tmp_path: Path, judge: LocalJudge, transcript: Transcript) -> None:
    judge.control()
    run = reverify(tmp_path, judge, transcript)
    assert run.result.returncode == 0, run.result.stderr
    rows = run.rows
    assert keys(rows) == sorted(expected_rewards())
    assert {key: row["reward"] for key, row in zip(keys(rows), rows, strict=True)} == expected_rewards()
    assert run.failures == []
    garbage = [row for row in rows if row["_ng_task_index"] == 5]
    assert all(row["judge_evaluations"][0]["judgement_parsing_issues"] == ["no_verdict"] for row in garbage)
    assert all(row["judge_evaluations"][0]["verdict_label"] is None for row in garbage)
    first = rows[0]
    assert first["expected_answer"] == "1/2" and first["extracted_answer"] == "0.5"
    assert first["agent_ref"]["name"] == AGENT and first["mask_sample"] is False
    stats = judge.stats()
    assert stats["requests"] == stats["answered"] == stats["bearer_requests"] == ROWS
    assert stats["unauthorized"] == 0, "the key from api_key_env reached the judge"
    metrics = orjson.loads(run.output.with_name("reverified_aggregate_metrics.json").read_bytes())
    assert [entry["agent_ref"] for entry in metrics] == [{"name": AGENT}]
    key_metrics = metrics[0]["key_metrics"]
    assert key_metrics["mean/reward"] == pytest.approx(5 / 12)
    assert key_metrics["judgement_parsing_issue_rate"] == pytest.approx(2 / 12)


def test_a_judge_that_keeps_failing_sends_every_row_to_the_sidecar(
    tmp_path: Path, judge: LocalJudge, transcript: Transcript
) -> None:
    judge.control(fail_status=503, fail_share=1.0)
    run = reverify(tmp_path, judge, transcript)
    assert run.result.returncode == 0, run.result.stderr
    assert run.rows == []
    failures = run.failures
    assert sorted(keys(failures)) == sorted(expected_rewards())
    rollouts = {(r["_ng_task_index"], r["_ng_rollout_index"]): r for r in read_jsonl(tmp_path / "rollouts.jsonl")}
    for row in failures:
        assert row["_ng_failure_class"] == "judge_failed" and row["failure_kind"] == "judge_failed"
        assert row["reward"] == 0.0 and row["mask_sample"] is True and "_ng_failure_terminal" not in row
        assert row["_ng_failure_judge_error"].startswith("HTTP 503 from the judge")
        assert row["_ng_failure_judge_error"].endswith("(after 3 attempts)")
        assert row["response"] == rollouts[(row["_ng_task_index"], row["_ng_rollout_index"])]["response"]
    assert judge.stats()["requests"] == 3 * ROWS, "each row's judge call was tried three times"


def test_an_auth_error_is_not_retried(tmp_path: Path, judge: LocalJudge, transcript: Transcript) -> None:
    judge.control(fail_status=401, fail_share=1.0)
    run = reverify(tmp_path, judge, transcript)
    assert run.result.returncode == 0, run.result.stderr
    assert run.rows == []
    failures = run.failures
    assert len(failures) == ROWS
    assert all(row["_ng_failure_judge_error"].startswith("HTTP 401") for row in failures)
    assert all("attempts" not in row["_ng_failure_judge_error"] for row in failures)
    assert judge.stats()["requests"] == ROWS, "a 401 is not retried"


def test_a_partial_outage_scores_some_rows_and_parks_the_rest(
    tmp_path: Path, judge: LocalJudge, transcript: Transcript
) -> None:
    judge.control(fail_status=503, fail_share=0.5, seed=3)
    run = reverify(tmp_path, judge, transcript)
    assert run.result.returncode == 0, run.result.stderr
    scored, failed = keys(run.rows), keys(run.failures)
    assert 0 < len(scored) < ROWS and len(scored) + len(failed) == ROWS
    assert sorted(scored + failed) == sorted(expected_rewards())
    assert all(row["reward"] == expected_rewards()[key] for key, row in zip(scored, run.rows, strict=True))
    assert all(row["_ng_failure_class"] == "judge_failed" for row in run.failures)
    stats = judge.stats()
    assert stats["requests"] == len(scored) + 3 * len(failed), "the same prompt fails the same way on every retry"

    # The judge is back: recovery re-judges only the parked rows, from their saved answers.
    judge.control()
    recovered = reverify(tmp_path, judge, transcript, "--judge-failed-only", "--append", rollouts=run.output)
    assert recovered.result.returncode == 0, recovered.result.stderr
    assert {key: row["reward"] for key, row in zip(keys(recovered.rows), recovered.rows, strict=True)} == (
        expected_rewards()
    )
    assert judge.stats()["requests"] == len(failed)


def test_a_judge_outage_shows_in_the_coverage_of_the_metrics(
    tmp_path: Path, judge: LocalJudge, transcript: Transcript
) -> None:
    judge.control(fail_status=503, fail_share=0.5, seed=3)
    run = reverify(tmp_path, judge, transcript)
    assert run.result.returncode == 0, run.result.stderr
    # Still down: --resume retries the parked rows, which fail again: two sidecar rows per key.
    resumed = reverify(tmp_path, judge, transcript, "--resume")
    assert resumed.result.returncode == 0, resumed.result.stderr
    failed_keys = set(keys(run.failures))
    assert len(run.failures) == 2 * len(failed_keys) and 0 < len(failed_keys) < ROWS
    metrics_path = run.output.with_name("reverified_aggregate_metrics.json")
    [entry] = orjson.loads(metrics_path.read_bytes())
    coverage = entry["coverage"]
    scored = len(run.rows)
    assert {name: coverage[name] for name in ("expected", "scored", "failed", "missing", "complete")} == {
        "expected": ROWS,
        "scored": scored,
        "failed": len(failed_keys),
        "missing": 0,
        "complete": False,
    }, "each failed key counts once, however many sidecar rows it has"
    assert coverage["failed_by_class"] == {"judge_failed": len(failed_keys)}
    mean = sum(row["reward"] for row in run.rows) / scored
    assert coverage["mean_reward"] == pytest.approx(mean)
    assert coverage["mean_reward_lower"] == pytest.approx(mean * scored / ROWS)
    assert coverage["mean_reward_upper"] == pytest.approx((mean * scored + len(failed_keys)) / ROWS)
    assert coverage["mean_reward_lower"] <= coverage["mean_reward"] <= coverage["mean_reward_upper"]
    assert entry["provenance"]["mixed"] is False and list(entry["provenance"]["rows_by_config"].values()) == [scored]
    summary = f"Metrics cover {scored} of {ROWS} rollouts ({len(failed_keys)} judge_failed): incomplete"
    assert summary in resumed.result.stdout

    # The judge is back: the parked keys are scored, their old sidecar rows no longer count as failures.
    judge.control()
    finished = reverify(tmp_path, judge, transcript, "--resume")
    assert finished.result.returncode == 0, finished.result.stderr
    [entry] = orjson.loads(metrics_path.read_bytes())
    assert entry["coverage"]["scored"] == ROWS and entry["coverage"]["failed_by_class"] == {}
    assert entry["coverage"]["complete"] is True
    assert entry["coverage"]["mean_reward_lower"] == entry["coverage"]["mean_reward_upper"] == pytest.approx(5 / 12)
    assert f"Metrics cover {ROWS} of {ROWS} rollouts\n" in finished.result.stdout


def test_an_agent_whose_rows_all_failed_still_has_an_entry(
    tmp_path: Path, judge: LocalJudge, transcript: Transcript
) -> None:
    judge.control(fail_status=503, fail_share=1.0)
    run = reverify(tmp_path, judge, transcript)
    assert run.result.returncode == 0, run.result.stderr
    [entry] = orjson.loads(run.output.with_name("reverified_aggregate_metrics.json").read_bytes())
    assert entry["agent_ref"] == {"name": AGENT} and entry["agent_metrics"] == {} and entry["key_metrics"] == {}
    assert entry["coverage"] == {
        "expected": ROWS,
        "scored": 0,
        "failed": ROWS,
        "failed_by_class": {"judge_failed": ROWS},
        "missing": 0,
        "complete": False,
        "mean_reward": None,
        "mean_reward_lower": 0.0,
        "mean_reward_upper": 1.0,
    }
    assert entry["provenance"] == {"rows_by_config": {}, "mixed": False}
    assert f"Metrics cover 0 of {ROWS} rollouts ({ROWS} judge_failed): incomplete" in run.result.stdout


def test_a_judge_nothing_listens_on_stops_the_run_at_its_first_rows(
    tmp_path: Path, judge: LocalJudge, transcript: Transcript
) -> None:
    judge.control()
    with socket.socket() as probe:  # a port nothing listens on once it is closed
        probe.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{probe.getsockname()[1]}"
    config = judge_config(tmp_path, judge)
    config.write_text(config.read_text().replace(judge.url, dead))
    stopped = reverify(tmp_path, judge, transcript, copies=50, config=config)  # 600 rows
    assert stopped.result.returncode == 1, stopped.result.stderr
    stderr = stopped.result.stderr
    assert "the first 16 rows verified by resources server 'judge' all failed to connect" in stderr
    assert f"(judge_failed): ClientConnectorError: Cannot connect to host {dead.removeprefix('http://')}" in stderr
    assert "run the same command with --resume" in stderr and "Traceback" not in stderr
    assert 16 <= len(stopped.failures) < 600, "stopped at its first rows, not after every row's retries"

    # The judge is up: the resume scores every row, the parked ones included.
    config.write_text(config.read_text().replace(dead, judge.url))
    resumed = reverify(tmp_path, judge, transcript, "--resume", copies=50, config=config)
    assert resumed.result.returncode == 0, resumed.result.stderr
    assert len(resumed.rows) == 600


def test_a_throttled_judge_makes_the_run_slower_not_its_rows_failed(
    tmp_path: Path, judge: LocalJudge, transcript: Transcript
) -> None:
    """The judge answers 50 requests a second and says how long to wait; the config's backoff (10-50 ms, three
    attempts) alone would spend every attempt within a burst."""
    judge.control(rate_limit_rps=50)
    run = reverify(tmp_path, judge, transcript, "--no-judge-cache", copies=25)  # 300 rows, 12 distinct prompts
    assert run.result.returncode == 0, run.result.stderr
    assert len(run.rows) == 300 and run.failures == []
    stats = judge.stats()
    assert stats["throttled"] > 0 and stats["answered"] == 300, stats


def test_the_causes_of_failures_are_on_screen(tmp_path: Path, judge: LocalJudge, transcript: Transcript) -> None:
    judge.control(fail_status=503, fail_share=1.0)
    run = reverify(tmp_path, judge, transcript)
    assert run.result.returncode == 0, run.result.stderr
    assert f"Top failure causes:\n  {ROWS} judge_failed: HTTP 503 from the judge" in run.result.stdout
    assert "(after 3 attempts)\n" in run.result.stdout


@pytest.mark.parametrize(
    ("flags", "code", "message"),
    [
        (["--fail-share", "2"], 2, "--fail-share: Input should be less than or equal to 1"),
        (["--fail-status", "200"], 2, "--fail-status: Input should be greater than or equal to 400"),
        (["--outage", "9:3"], 2, "outage must be START:END"),
        (["--api-key-env", "E2E_SURELY_UNSET_VARIABLE"], 1, "not set in the environment"),
    ],
)
def test_judge_serve_refuses_bad_flags(tmp_path: Path, flags: list[str], code: int, message: str) -> None:
    result = run_reverify("judge-serve", "--port", "0", *flags, home=tmp_path)
    assert result.returncode == code and message in result.stderr, result.stderr
    assert "listening" not in result.stdout


def test_the_api_key_is_in_no_file_and_no_output(tmp_path: Path, judge: LocalJudge, transcript: Transcript) -> None:
    """Every run above plus a ``reverify serve`` of the judge config, fed a success and a 401."""
    config = judge_config(tmp_path, judge)
    stderr_path, stdout_path = tmp_path / "serve_stderr.txt", tmp_path / "serve_stdout.txt"
    with stdout_path.open("wb") as out, stderr_path.open("wb") as err:
        # No cache: the second request, the same as the first, must reach the judge and get its 401.
        serve = subprocess.Popen(
            [REVERIFY, "serve", "--config", str(config), "--no-judge-cache"], stdout=out, stderr=err
        )
    try:
        deadline = time.monotonic() + CLI_LIMIT_S
        while not (found := re.search(r"listening on (http://\S+)", stdout_path.read_text())):
            assert serve.poll() is None and time.monotonic() < deadline, stderr_path.read_text()
            time.sleep(0.05)
        inputs, rollouts = qa_dataset(tmp_path)
        body = read_jsonl(inputs)[0] | {"response": read_jsonl(rollouts)[-1]["response"]}
        replies = []
        for knobs in ({}, {"fail_status": 401, "fail_share": 1.0}):
            judge.control(**knobs)
            request = urllib.request.Request(f"{found.group(1)}/verify", data=orjson.dumps(body), method="POST")
            with urllib.request.urlopen(request, timeout=30) as reply:
                replies.append(orjson.loads(reply.read()))
        assert replies[0]["reward"] == 1.0 and replies[1]["_ng_failure_class"] == "judge_failed"
        transcript.outputs.append(orjson.dumps(replies).decode())
    finally:
        serve.send_signal(signal.SIGINT)
        serve.wait(timeout=CLI_LIMIT_S)
    judge.control()
    transcript.roots.append(tmp_path)

    leaks = [str(path) for root in transcript.roots for path in root.rglob("*") if path.is_file() and leaks_key(path)]
    assert leaks == []
    assert not any(KEY in text for text in transcript.outputs)
    assert len(transcript.roots) >= 3, "the runs above wrote files that were searched"


def leaks_key(path: Path) -> bool:
    return KEY.encode() in path.read_bytes()
