"""The judge-call cache, end to end: ``reverify run`` of the built-in judge against ``reverify judge-serve``, twice.

The cache is on by default for users; the test suite turns it off (``tests/conftest.py``), so each test here turns
it back on, in the Dagster home of its own runs, where a user's cache is.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from reverify_assets.judge_cache.store import CACHE_FILE_NAME, JUDGE_CACHE_ENV
from tests.support.cli import CLI_LIMIT_S, run_args, start_piped
from tests.support.instance import latest_materialization, open_instance
from tests.support.judge_serve import LocalJudge
from tests.support.qa_judge import (
    NO_VERDICT_ROWS,
    NO_VERDICT_TASK,
    ROWS,
    Run,
    Transcript,
    judge_calls_line,
    judge_config,
    qa_dataset,
    reverify,
)

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def cache_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(JUDGE_CACHE_ENV)


def rewards(run: Run) -> dict[tuple[int, int], float]:
    return {(row["_ng_task_index"], row["_ng_rollout_index"]): row["reward"] for row in run.rows}


def test_a_second_run_of_an_unchanged_config_makes_no_judge_call(tmp_path: Path, judge: LocalJudge) -> None:
    judge.control()
    first = reverify(tmp_path, judge, Transcript())
    assert first.result.returncode == 0, first.result.stderr
    assert judge.stats()["answered"] == ROWS
    cache = tmp_path / "dagster_home" / CACHE_FILE_NAME
    said = judge_calls_line(first.result.stdout)
    assert (said.calls, said.hits, said.cache) == (ROWS, 0, cache)
    assert said.input_tokens == sum(e["usage"]["prompt_tokens"] for row in first.rows for e in row["judge_evaluations"])
    assert said.output_tokens > 0

    judge.control()
    second = reverify(tmp_path, judge, Transcript(), "--overwrite")
    assert second.result.returncode == 0, second.result.stderr
    # Only the replies without a verdict were not kept: those rows ask again, in case the judge now gives one.
    assert judge.stats()["requests"] == NO_VERDICT_ROWS
    assert rewards(second) == rewards(first) and len(second.rows) == ROWS and second.failures == []
    cached = {row["_ng_task_index"]: row["judge_evaluations"][0].get("cached", False) for row in second.rows}
    assert cached == {task: task != NO_VERDICT_TASK for task in cached}
    said = judge_calls_line(second.result.stdout)
    assert (said.calls, said.hits, said.cache) == (NO_VERDICT_ROWS, ROWS - NO_VERDICT_ROWS, cache)
    metadata, _ = latest_materialization(open_instance(tmp_path / "dagster_home"), "reverified_rows")
    assert (metadata["judge calls"], metadata["judge cache hits"]) == (NO_VERDICT_ROWS, ROWS - NO_VERDICT_ROWS)

    judge.control()
    uncached = reverify(tmp_path, judge, Transcript(), "--overwrite", "--no-judge-cache")
    assert uncached.result.returncode == 0, uncached.result.stderr
    assert judge.stats()["answered"] == ROWS
    assert rewards(uncached) == rewards(first)
    said = judge_calls_line(uncached.result.stdout)
    assert (said.calls, said.hits, said.cache) == (ROWS, None, None)
    with open_instance(tmp_path / "dagster_home") as instance:
        [latest] = instance.get_runs(limit=1)
    assert latest.run_config["resources"]["rescoring"]["config"]["no_judge_cache"] is True  # kept for a re-execution


def test_a_resume_asks_the_judge_only_for_rows_it_never_answered(tmp_path: Path, judge: LocalJudge) -> None:
    judge.control(fail_status=503, fail_share=0.5, seed=3)
    first = reverify(tmp_path, judge, Transcript())
    assert first.result.returncode == 0, first.result.stderr
    failed = len(first.failures)
    assert 0 < failed < ROWS
    # Rows the first run scored with no verdict: their replies were not kept (read now: the next run overwrites).
    no_verdict = sum(row["_ng_task_index"] == NO_VERDICT_TASK for row in first.rows)

    judge.control()
    # The whole run again, not a resume: every verdict the judge gave before is answered by the cache.
    again = reverify(tmp_path, judge, Transcript(), "--overwrite")
    assert again.result.returncode == 0, again.result.stderr
    asked = failed + no_verdict
    assert judge.stats()["answered"] == asked
    said = judge_calls_line(again.result.stdout)
    assert (said.calls, said.hits) == (asked, ROWS - asked)


def test_a_changed_judge_prompt_is_asked_again(tmp_path: Path, judge: LocalJudge) -> None:
    judge.control()
    assert reverify(tmp_path, judge, Transcript()).result.returncode == 0
    config = judge_config(tmp_path, judge)
    config.write_text(config.read_text() + "      judge_system_message: Judge strictly.\n")
    judge.control()
    changed = reverify(tmp_path, judge, Transcript(), "--overwrite", config=config)
    assert changed.result.returncode == 0, changed.result.stderr
    assert judge.stats()["answered"] == ROWS
    assert (judge_calls_line(changed.result.stdout).calls, judge_calls_line(changed.result.stdout).hits) == (ROWS, 0)


def test_runs_at_the_same_time_share_the_cache(tmp_path: Path, judge: LocalJudge) -> None:
    judge.control(latency_ms=20)  # the runs overlap while both write to the cache
    inputs, rollouts = qa_dataset(tmp_path, copies=10)
    config = judge_config(tmp_path, judge)
    home = tmp_path / "dagster_home"
    outputs = [tmp_path / side / "out.jsonl" for side in "ab"]
    runs = [start_piped(*run_args(config, inputs, rollouts, output), home=home) for output in outputs]
    for process in runs:
        stdout, stderr = process.communicate(timeout=CLI_LIMIT_S)
        assert process.returncode == 0, stderr
        assert judge_calls_line(stdout).hits is not None
    done = [Run(subprocess.CompletedProcess([], 0), output) for output in outputs]
    assert rewards(done[0]) == rewards(done[1]) and len(done[0].rows) == 10 * ROWS
    assert judge.stats()["answered"] <= 2 * 10 * ROWS

    judge.control()
    after = reverify(tmp_path, judge, Transcript(), copies=10)
    assert after.result.returncode == 0, after.result.stderr
    assert rewards(after) == rewards(done[0]) and judge.stats()["requests"] == 10 * NO_VERDICT_ROWS
