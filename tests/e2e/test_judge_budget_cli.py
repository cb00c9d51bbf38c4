"""``--max-judge-calls`` and ``--max-cost``: a run stops sending rows at its judge budget, and a resume goes on."""

from __future__ import annotations

from pathlib import Path

import pytest

from reverify_assets.budget.prices import JudgePrices
from tests.support.instance import latest_materialization, open_instance
from tests.support.judge_serve import LocalJudge
from tests.support.qa_judge import ROWS, Transcript, judge_calls_line, reverify

pytestmark = pytest.mark.slow
COPIES = 10  # 120 rows


def test_a_call_budget_stops_the_run_at_it_and_a_resume_finishes(tmp_path: Path, judge: LocalJudge) -> None:
    judge.control(latency_ms=5)
    stopped = reverify(tmp_path, judge, Transcript(), "--max-judge-calls", "30", copies=COPIES)
    assert stopped.result.returncode == 0, stopped.result.stderr
    assert judge.stats()["answered"] == 30 and len(stopped.rows) == 30 and stopped.failures == []
    left = COPIES * ROWS - 30
    assert (
        f"Stopped early: --max-judge-calls 30 reached; {left} rows were not sent. Run the same command with --resume"
        in stopped.result.stdout
    )
    metadata, _ = latest_materialization(open_instance(tmp_path / "dagster_home"), "reverified_rows")
    assert metadata["stopped by"] == "--max-judge-calls 30 reached" and metadata["rows left unsent"] == left
    assert metadata["judge calls"] == 30
    assert f"Metrics cover 30 of {COPIES * ROWS} rollouts" in stopped.result.stdout

    judge.control()
    resumed = reverify(tmp_path, judge, Transcript(), "--resume", copies=COPIES)
    assert resumed.result.returncode == 0, resumed.result.stderr
    assert len(resumed.rows) == COPIES * ROWS and judge.stats()["answered"] == left
    assert "Stopped early" not in resumed.result.stdout


def test_a_cost_budget_stops_the_run_near_it(tmp_path: Path, judge: LocalJudge) -> None:
    judge.control(latency_ms=5)
    prices = JudgePrices(input_per_million_tokens=1_000_000, output_per_million_tokens=2_000_000)  # 1 and 2 a token
    flags = [
        f"++judge_prices.input_per_million_tokens={prices.input_per_million_tokens}",
        f"++judge_prices.output_per_million_tokens={prices.output_per_million_tokens}",
        "--concurrency",
        "4",
    ]
    whole = reverify(tmp_path, judge, Transcript(), *flags, copies=COPIES)
    assert whole.result.returncode == 0, whole.result.stderr
    said = judge_calls_line(whole.result.stdout)
    whole_cost = prices.usage_cost(said.input_tokens, said.output_tokens)
    per_row = whole_cost / (COPIES * ROWS)

    budget = whole_cost / 3
    stopped = reverify(tmp_path, judge, Transcript(), "--overwrite", "--max-cost", f"{budget}", *flags, copies=COPIES)
    assert stopped.result.returncode == 0, stopped.result.stderr
    said = judge_calls_line(stopped.result.stdout)
    spent = prices.usage_cost(said.input_tokens, said.output_tokens)
    # Close to the budget: over it by the rows in flight at most (twice --concurrency), never by more.
    assert budget - 8 * per_row * 2 <= spent <= budget + 8 * per_row * 2, (spent, budget, per_row)
    assert f"Stopped early: --max-cost {budget:g} reached" in stopped.result.stdout
    assert 0 < len(stopped.rows) < COPIES * ROWS


@pytest.mark.parametrize(
    ("flags", "code", "message"),
    [
        (["--max-cost", "5"], 2, "--max-cost needs the judge's prices: a top-level `judge_prices:` block"),
        (["--max-cost", "0", "++judge_prices.input_per_million_tokens=1"], 2, "--max-cost must be more than 0"),
        (["--max-judge-calls", "0"], 2, "--max-judge-calls must be at least 1, got 0"),
    ],
)
def test_a_budget_that_cannot_work_is_refused(
    tmp_path: Path, judge: LocalJudge, flags: list[str], code: int, message: str
) -> None:
    refused = reverify(tmp_path, judge, Transcript(), *flags)
    assert refused.result.returncode == code and message in refused.result.stderr, refused.result.stderr
    assert not refused.output.exists()
