"""``reverify run --dry-run``: the census of a run before it spends anything, against what the real run then did."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import MCQA_CONFIG, run_reverify
from tests.support.judge_serve import LocalJudge
from tests.support.qa_judge import AGENT, ROWS, Transcript, judge_config, qa_dataset, reverify

pytestmark = pytest.mark.slow
ESTIMATE = "estimated: 1 token per 4 characters (tiktoken is not installed here)"


def prompt_tokens(rows: list[dict[str, Any]]) -> int:
    """The tokens, by the census's estimate, of the requests the real run sent its judge."""
    return sum(
        math.ceil(len(message["content"]) / 4)
        for row in rows
        for evaluation in row["judge_evaluations"]
        for message in evaluation["responses_create_params"]["messages"]
    )


def test_the_census_of_a_fresh_run_is_what_the_run_then_spends(tmp_path: Path, judge: LocalJudge) -> None:
    judge.control()
    prices = ["++judge_prices.input_per_million_tokens=2000", "++judge_prices.output_per_million_tokens=1000"]
    dry = reverify(tmp_path, judge, Transcript(), "--dry-run", *prices, "++judge_prices.output_tokens_per_call=10")
    assert dry.result.returncode == 0, dry.result.stderr
    assert judge.stats()["requests"] == 0
    assert not (tmp_path / "dagster_home").exists() and not dry.output.parent.exists(), "a dry run writes nothing"

    real = reverify(tmp_path, judge, Transcript())
    assert real.result.returncode == 0, real.result.stderr
    tokens = prompt_tokens(real.rows)
    cost = (tokens * 2000 + ROWS * 10 * 1000) / 1e6
    assert dry.result.stdout.splitlines() == [
        "Dry run: nothing was written and no server was started.",
        f"Rows to verify: {ROWS}",
        f"  {ROWS} by 'judge' for agent '{AGENT}'",
        f"Judge calls: {ROWS}",
        f"Prompt tokens: {tokens:,}, {ESTIMATE}",
        f"  'judge': {ROWS} calls, {tokens:,} tokens",
        f"Cost: {cost:,.2f} (prompt tokens at 2000/M + 10 output tokens a call at 1000/M)",
    ]
    assert judge.stats()["answered"] == ROWS


def test_a_resume_and_a_recovery_are_counted_with_what_they_skip(tmp_path: Path, judge: LocalJudge) -> None:
    judge.control(fail_status=503, fail_share=0.5, seed=3)
    first = reverify(tmp_path, judge, Transcript())
    assert first.result.returncode == 0, first.result.stderr
    scored, failed = len(first.rows), len(first.failures)
    judge.control()

    resume = reverify(tmp_path, judge, Transcript(), "--resume", "--dry-run")
    assert resume.result.returncode == 0, resume.result.stderr
    lines = resume.result.stdout.splitlines()
    assert lines[1:4] == [
        f"Rows to verify: {failed}",
        f"  {failed} by 'judge' for agent '{AGENT}'",
        f"Rows skipped: {scored}",
    ]
    assert lines[4:7] == [
        f"  {scored} already in the output",
        "  0 a terminal failure in the sidecar",
        "  0 failed 3 times or more",
    ]

    recovery = reverify(
        tmp_path, judge, Transcript(), "--judge-failed-only", "--append", "--dry-run", rollouts=first.output
    )
    assert recovery.result.returncode == 0, recovery.result.stderr
    lines = recovery.result.stdout.splitlines()
    assert lines[1:5] == [
        f"Rows to verify: {failed}",
        f"  {failed} by 'judge' for agent '{AGENT}'",
        "Rows skipped: 0",
        "  0 not a judge failure",
    ]
    assert judge.stats()["requests"] == 0
    assert len(first.failures) == failed, "the dry runs left the sidecar as it was"


def test_a_second_opinion_makes_a_range(tmp_path: Path, judge: LocalJudge) -> None:
    judge.control()
    config = judge_config(tmp_path, judge)
    config.write_text(config.read_text() + "      check_twice_swap: true\n")
    dry = reverify(tmp_path, judge, Transcript(), "--dry-run", config=config)
    assert dry.result.returncode == 0, dry.result.stderr
    real = reverify(tmp_path, judge, Transcript(), config=config)
    calls = sum(len(row["judge_evaluations"]) for row in real.rows)
    assert ROWS < calls < 2 * ROWS
    said = f"Judge calls: {ROWS} to {2 * ROWS} (the most: a second call wherever a row's first verdict may need one)"
    assert said in dry.result.stdout


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "++judge_prices.input_per_million_tokens=-1",
            "config: `judge_prices.input_per_million_tokens`: Input should be",
        ),
        ("++judge_prices.input_per_milion_tokens=1", "`judge_prices.input_per_milion_tokens`: Extra inputs"),
    ],
)
def test_a_bad_price_is_a_config_error_naming_it(
    tmp_path: Path, judge: LocalJudge, override: str, message: str
) -> None:
    dry = reverify(tmp_path, judge, Transcript(), "--dry-run", override)
    assert dry.result.returncode == 1 and message in dry.result.stderr, dry.result.stderr


def test_a_config_without_a_judge_says_so(tmp_path: Path) -> None:
    inputs, rollouts = qa_dataset(tmp_path)
    args = [
        "run",
        "--config",
        MCQA_CONFIG,
        "--inputs",
        inputs,
        "--rollouts",
        rollouts,
        "--output",
        tmp_path / "o.jsonl",
    ]
    result = run_reverify(*args, "--dry-run", home=tmp_path / "home")
    assert result.returncode == 0, result.stderr
    assert "Judge calls: none (no judge server in the config)" in result.stdout
