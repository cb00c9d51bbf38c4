"""NeMo Gym's own LLM judge server, its judge model behind NeMo Gym's own model server, against ``judge-serve``.

As a NeMo Gym user would run it: the shipped configs of ``resources_servers/equivalence_llm_judge`` and of
``responses_api_models/openai_model`` (its ``policy_model`` block, which the judge names), the model's address and
name given as NeMo Gym's own top-level keys. The rows are the judge server's example rollouts.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from reverify_assets.config.topology import MODELS, RESOURCES_SERVERS
from reverify_assets.gym.installation import PYTHON_KEY, find_installation
from reverify_assets.judge_cache.store import CACHE_FILE_NAME, JUDGE_CACHE_ENV
from tests.support.cli import REVERIFY, read_jsonl, write_jsonl
from tests.support.judge_serve import LocalJudge, judge_serve
from tests.support.nemo_gym import gym_env, nemo_gym_python, processes_in, processes_running
from tests.support.qa_judge import judge_calls_line

pytestmark = pytest.mark.slow
CLI_LIMIT_S = 600  # the first run builds the judge server's venv (datasets==4.0.0)
JUDGE = "equivalence_llm_judge"
AGENT = "equivalence_llm_judge_simple_agent"  # the agent block of the judge's shipped config
# The local judge model's verdicts on the five example rollouts: "Charles Darwin" is not "darwin", nor
# "amino acids" "amino", for its normalised comparison.
REWARDS = [1.0, 0.0, 1.0, 1.0, 0.0]


@pytest.fixture(scope="module")
def root() -> Path:
    return find_installation({PYTHON_KEY: str(nemo_gym_python())}).root


@pytest.fixture(scope="module")
def judge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalJudge]:
    with judge_serve(tmp_path_factory.mktemp("judge_serve")) as judge:
        yield judge


@pytest.fixture
def dataset(tmp_path: Path, root: Path) -> tuple[Path, Path]:
    """The judge server's example rollouts as the two files ``gym eval run`` writes."""
    examples = (root / RESOURCES_SERVERS / JUDGE / "data" / "example_rollouts.jsonl").read_text().splitlines()
    agent = {"type": "responses_api_agents", "name": AGENT}
    inputs, rollouts = [], []
    for task, line in enumerate(examples):
        example, key = json.loads(line), {"_ng_task_index": task, "_ng_rollout_index": 0}
        inputs.append(
            {
                "responses_create_params": example["responses_create_params"],
                "expected_answer": example["expected_answer"],
                "agent_ref": agent,
                **key,
            }
        )
        rollouts.append({"response": example["response"], "reward": example["reward"], **key, "agent_ref": agent})
    return (
        write_jsonl(tmp_path / "rollouts_materialized_inputs.jsonl", inputs),
        write_jsonl(tmp_path / "rollouts.jsonl", rollouts),
    )


def run(
    tmp_path: Path, root: Path, judge: LocalJudge, inputs: Path, rollouts: Path, output: Path, *flags: str
) -> subprocess.CompletedProcess[str]:
    configs = [
        root / RESOURCES_SERVERS / JUDGE / "configs" / f"{JUDGE}.yaml",
        root / MODELS / "openai_model" / "configs" / "openai_model.yaml",
    ]
    args = [
        "run",
        *(part for config in configs for part in ("--config", config)),
        *("--inputs", inputs, "--rollouts", rollouts, "--output", output),
        f"++policy_base_url={judge.url}/v1",
        "++policy_api_key=unused-by-the-local-model",
        "++policy_model_name=local-equivalence-judge",
        *flags,
    ]
    return subprocess.run(
        [REVERIFY, *map(str, args)],
        capture_output=True,
        text=True,
        env=gym_env(tmp_path / "home", nemo_gym_python()),
        timeout=CLI_LIMIT_S,
    )


def assert_no_server_left(root: Path) -> None:
    assert processes_in(root / RESOURCES_SERVERS / JUDGE) == []
    assert processes_in(root / MODELS / "openai_model") == []
    assert processes_running("reverify_assets.judge_cache.proxy") == []


def test_nemo_gyms_judge_server_grades_through_its_model_server(
    tmp_path: Path, root: Path, judge: LocalJudge, dataset: tuple[Path, Path]
) -> None:
    judge.control(latency_ms=300)  # long enough for the rows of a batch to be seen at the judge together
    done = run(tmp_path, root, judge, *dataset, tmp_path / "out" / "o.jsonl", "--force")
    assert done.returncode == 0, done.stderr
    assert "starting NeMo Gym's openai_model server for 'policy_model'" in done.stderr
    assert f"starting NeMo Gym's {JUDGE} server" in done.stderr
    # All five rows in one /verify_batch request, each waiting on its judge call at the same time.
    assert f"Requests: {JUDGE} by /verify_batch, 16 rows a request" in done.stdout, done.stdout
    assert judge.stats()["most_in_flight"] == len(REWARDS)
    assert f"Metrics computed: {JUDGE} here, compute_metrics and get_key_metrics by the server" in done.stdout
    rows = read_jsonl(tmp_path / "out" / "unsafe_o.jsonl")
    assert [row["reward"] for row in rows] == REWARDS
    assert all(len(row["judge_evaluations"]) == 1 for row in rows)
    stats = judge.stats()
    assert stats["answered"] == stats["requests"] == len(REWARDS)
    [entry] = json.loads((tmp_path / "out" / "unsafe_o_aggregate_metrics.json").read_text())
    assert entry["agent_metrics"]["mean/reward"] == pytest.approx(sum(REWARDS) / len(REWARDS))
    assert entry["agent_metrics"]["judgement_parsing_issue_rate"] == 0.0  # the judge server's own metrics hook
    assert entry["coverage"]["complete"] is True
    assert_no_server_left(root)


def test_judge_failures_are_parked_then_recovered(
    tmp_path: Path, root: Path, judge: LocalJudge, dataset: tuple[Path, Path]
) -> None:
    inputs, rollouts = dataset
    judge.control(fail_share=1.0, fail_status=503)
    outage = run(tmp_path, root, judge, inputs, rollouts, tmp_path / "outage" / "o.jsonl", "--force")
    assert outage.returncode == 0, outage.stderr
    assert read_jsonl(tmp_path / "outage" / "unsafe_o.jsonl") == []
    failures = read_jsonl(tmp_path / "outage" / "unsafe_o_failures.jsonl")
    assert [row["_ng_failure_class"] for row in failures] == ["judge_failed"] * len(REWARDS)
    assert all("_ng_failure_terminal" not in row for row in failures)
    assert "5 judge_failed" in outage.stdout + outage.stderr

    judge.control()
    recovered = run(
        tmp_path, root, judge, inputs, tmp_path / "outage" / "unsafe_o.jsonl", tmp_path / "r" / "o.jsonl",
        "--judge-failed-only",
    )  # fmt: skip
    assert recovered.returncode == 0, recovered.stderr
    assert "recovered 5 of 5" in recovered.stdout + recovered.stderr
    assert [row["reward"] for row in read_jsonl(tmp_path / "r" / "o.jsonl")] == REWARDS
    [entry] = json.loads((tmp_path / "r" / "o_aggregate_metrics.json").read_text())
    assert entry["coverage"]["complete"] is True and entry["coverage"]["failed"] == 0
    assert_no_server_left(root)


def test_the_judge_call_cache_answers_a_second_run_through_its_proxy(
    tmp_path: Path, root: Path, judge: LocalJudge, dataset: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """NeMo Gym's judge calls its model server through the cache's proxy: a re-run asks the judge nothing."""
    monkeypatch.delenv(JUDGE_CACHE_ENV)  # as a user runs: the cache in the Dagster home
    judge.control()
    first = run(tmp_path, root, judge, *dataset, tmp_path / "out" / "o.jsonl", "--force")
    assert first.returncode == 0, first.stderr
    assert judge.stats()["answered"] == len(REWARDS)
    cache = tmp_path / "home" / CACHE_FILE_NAME
    said = judge_calls_line(first.stdout)
    assert (said.calls, said.hits, said.cache) == (len(REWARDS), 0, cache)
    rows = read_jsonl(tmp_path / "out" / "unsafe_o.jsonl")
    assert said.input_tokens == sum(row["judge_evaluations"][0]["response"]["usage"]["input_tokens"] for row in rows)

    judge.control(fail_share=1.0, fail_status=503)  # a call now would fail: the rows must not need one
    second = run(tmp_path, root, judge, *dataset, tmp_path / "out" / "o.jsonl", "--force", "--overwrite")
    assert second.returncode == 0, second.stderr
    assert judge.stats()["requests"] == 0
    rows = read_jsonl(tmp_path / "out" / "unsafe_o.jsonl")
    assert [row["reward"] for row in rows] == REWARDS
    assert all(row["judge_evaluations"][0]["response"]["metadata"] == {"reverify_judge_cache": "hit"} for row in rows)
    assert f"Judge calls: 0 made, {len(REWARDS)} answered by the judge-call cache ({cache})" in second.stdout

    judge.control()
    uncached = run(
        tmp_path, root, judge, *dataset, tmp_path / "out" / "o.jsonl", "--force", "--overwrite", "--no-judge-cache"
    )
    assert uncached.returncode == 0, uncached.stderr
    assert judge.stats()["answered"] == len(REWARDS)
    assert_no_server_left(root)
