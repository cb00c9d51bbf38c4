"""No run of 8 characters of an API key in anything ``reverify run`` writes or prints, whoever quotes the key back.

A provider refusing a key quotes it masked (all but its last 4 characters): our judge server redacts what it
is told, and the CLI redacts what any server answers (NeMo Gym's judges included) before it reaches a file, a
log, the Dagster instance or an error message.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tests.support.cli import read_jsonl, run_reverify, run_with_config, write_jsonl
from tests.support.echoing_judge import EchoingJudge, masked_forms
from tests.support.fake_verifier import FakeVerifier
from tests.support.instance import open_instance
from tests.support.judge_rows import message

pytestmark = pytest.mark.slow

KEY = "sk-proj-Zq8Lw3Xv7Nc2Rb5Ty1Mk4Hd9Gf6Js0Pa1"  # 41 characters, as in the issue
KEY_ENV = "E2E_SECRETS_JUDGE_KEY"
AGENT = "qa_agent"


def runs_of_key(data: bytes) -> list[str]:
    """The 8-character runs of the key that ``data`` holds."""
    return [KEY[i : i + 8] for i in range(len(KEY) - 7) if KEY[i : i + 8].encode() in data]


def leaking_files(root: Path) -> dict[str, list[str]]:
    files = (path for path in root.rglob("*") if path.is_file())
    return {str(path): found for path in files if (found := runs_of_key(path.read_bytes()))}


def qa_dataset(directory: Path) -> tuple[Path, Path]:
    """Two tasks of two rollouts; a FakeVerifier fails the first task's judge calls and scores the second's."""
    inputs, rollouts = [], []
    for task in range(2):
        for rollout in range(2):
            key = {"_ng_task_index": task, "_ng_rollout_index": rollout}
            question = f"What is {task} + 1?"
            inputs.append(
                {
                    "responses_create_params": {"input": [{"role": "user", "content": question}]},
                    "question": question,
                    "expected_answer": str(task + 1),
                    "behaviour": "ok" if task else "judge_failed",
                    "agent_ref": {"type": "responses_api_agents", "name": AGENT},
                    **key,
                }
            )
            response = {"output": [message(str(task + 1))], "usage": {"input_tokens": 9, "output_tokens": 1}}
            rollouts.append({"response": response, "reward": 1.0, **key, "agent_ref": {"name": AGENT}})
    return (
        write_jsonl(directory / "rollouts_materialized_inputs.jsonl", inputs),
        write_jsonl(directory / "rollouts.jsonl", rollouts),
    )


def judge_config(directory: Path, fields: str) -> Path:
    path = directory / "judge.yaml"
    path.write_text(f"judge:\n  resources_servers:\n    equivalence_judge:\n      api_key_env: {KEY_ENV}\n{fields}")
    return path


def assert_no_run_of_the_key(tmp_path: Path, *printed: str) -> None:
    files = list(tmp_path.rglob("*"))
    assert any(path.parent.name == "out" for path in files) and any("dagster_home" in path.parts for path in files)
    assert leaking_files(tmp_path) == {}
    assert [runs_of_key(text.encode()) for text in printed] == [[] for _ in printed]


def test_a_judge_that_quotes_the_masked_key_leaves_no_run_of_it_anywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    inputs, rollouts = qa_dataset(tmp_path)
    output = tmp_path / "out" / "reverified.jsonl"
    with EchoingJudge() as judge:
        config = judge_config(tmp_path, f"      judge_base_url: {judge.url}/v1\n      max_attempts: 1\n")
        result = run_with_config(config, inputs, rollouts, output, home=tmp_path / "dagster_home")
        assert judge.tokens == [KEY] * 4, "the judge was sent the key"
    assert result.returncode == 0, result.stderr
    failures = read_jsonl(output.with_name("reverified_failures.jsonl"))
    assert [row["_ng_failure_class"] for row in failures] == ["judge_failed"] * 4
    said = failures[0]["_ng_failure_judge_error"]
    assert said.startswith("HTTP 401 from the judge: ") and "Incorrect API key provided: [REDACTED]****" in said
    assert masked_forms(KEY)[2] in said, "what holds no run of 8 characters is kept"
    assert_no_run_of_the_key(tmp_path, result.stdout, result.stderr)


def test_a_nemo_gym_server_that_quotes_the_key_is_redacted_by_the_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server reached by ``url`` (NeMo Gym's judge, say): its failure rows and its error bodies quote the key;
    the run stops at a failing ``/aggregate_metrics``, so an error message and a failed Dagster step hold it too."""
    monkeypatch.setenv(KEY_ENV, KEY)
    inputs, rollouts = qa_dataset(tmp_path)
    output = tmp_path / "out" / "reverified.jsonl"
    with FakeVerifier(aggregate_failures=math.inf) as server:
        server.judge_error = f"judge call failed: HTTP 401: Incorrect API key provided: {masked_forms(KEY)[0]}"
        server.aggregate_error = f"upstream refused key {masked_forms(KEY)[1]}"
        config = judge_config(tmp_path, f"      url: {server.url}\n")
        result = run_with_config(config, inputs, rollouts, output, home=tmp_path / "dagster_home")
    assert result.returncode == 1, result.stderr
    assert "upstream refused key [REDACTED]" in result.stderr and "Traceback" not in result.stderr
    failures = read_jsonl(output.with_name("reverified_failures.jsonl"))
    assert [row["_ng_failure_judge_error"] for row in failures] == [
        "judge call failed: HTTP 401: Incorrect API key provided: [REDACTED]****"
    ] * 2
    assert len(read_jsonl(output)) == 2
    assert_no_run_of_the_key(tmp_path, result.stdout, result.stderr)


def test_a_key_given_as_an_override_is_not_kept_in_the_run_config(tmp_path: Path) -> None:
    """The run's config is its run config, which Dagster stores and shows: the override holding the key is there
    redacted, and the run itself had it as given."""
    inputs, rollouts = qa_dataset(tmp_path)
    output = tmp_path / "out" / "reverified.jsonl"
    override = f"++judge.resources_servers.equivalence_judge.openai_api_key={KEY}"
    merged = tmp_path / "out" / "merged.jsonl"
    home = tmp_path / "dagster_home"
    with FakeVerifier() as server:
        config = judge_config(tmp_path, f"      url: {server.url}\n")
        result = run_with_config(config, inputs, rollouts, output, override, home=home)
        assert result.returncode == 0, result.stderr
        aggregated = run_reverify(
            "aggregate", "--config", config, "--input-glob", output, "--output", merged, override, home=home
        )
    assert aggregated.returncode == 0, aggregated.stderr
    assert len(read_jsonl(output)) == 2, "the second task's rows are scored (the first's fail the judge)"
    assert read_jsonl(merged) == read_jsonl(output)
    with open_instance(home) as instance:
        runs = {run.job_name: run for run in instance.get_runs()}
    redacted = ["++judge.resources_servers.equivalence_judge.openai_api_key=[REDACTED]"]
    assert runs["reverify_run"].run_config["resources"]["rescoring"]["config"]["overrides"] == redacted
    assert runs["reverify_aggregate"].run_config["resources"]["shard_aggregate"]["config"]["overrides"] == redacted
    assert_no_run_of_the_key(tmp_path, result.stdout, result.stderr, aggregated.stdout, aggregated.stderr)
