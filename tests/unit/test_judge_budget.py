"""When a judge budget lets one more row be sent, and what a row's judge calls cost."""

from __future__ import annotations

from typing import Any

import pytest

from reverify_assets.budget.judge_budget import JudgeBudget, JudgeSpent
from reverify_assets.budget.prices import JudgePrices
from reverify_assets.budget.token_estimate import token_counter
from reverify_assets.rows.routed_row import routed

COUNT = token_counter().count
PRICES = JudgePrices(input_per_million_tokens=1_000_000, output_per_million_tokens=2_000_000)  # 1 and 2 a token


@pytest.mark.parametrize(
    ("budget", "spent", "why"),
    [
        (JudgeBudget(), JudgeSpent(10**6, 10**9, 10**9, 10, 100), None),  # no budget
        (JudgeBudget(max_calls=10), JudgeSpent(0, 0, 0, 0, 0), None),
        (JudgeBudget(max_calls=10), JudgeSpent(0, 0, 0, 0, 9), None),  # one call a row until a row settles
        (JudgeBudget(max_calls=10), JudgeSpent(0, 0, 0, 0, 10), "--max-judge-calls 10 reached"),
        (JudgeBudget(max_calls=10), JudgeSpent(8, 0, 0, 4, 0), None),  # two calls a row so far: one more fits
        (JudgeBudget(max_calls=10), JudgeSpent(8, 0, 0, 4, 1), "--max-judge-calls 10 reached"),
        (JudgeBudget(max_calls=10), JudgeSpent(10, 0, 0, 10, 0), "--max-judge-calls 10 reached"),
        (JudgeBudget(max_calls=10), JudgeSpent(0, 0, 0, 30, 0), None),  # rows the cache answered cost nothing
        # ... but the rows in flight still count a call each: a cached stretch does not let 128 rows out.
        (JudgeBudget(max_calls=10), JudgeSpent(2, 0, 0, 30, 8), "--max-judge-calls 10 reached"),
        (JudgeBudget(max_calls=10), JudgeSpent(2, 0, 0, 30, 7), None),
        (JudgeBudget(max_cost=100, prices=PRICES), JudgeSpent(1, 60, 20, 1, 0), "--max-cost 100 reached"),
        (JudgeBudget(max_cost=100, prices=PRICES), JudgeSpent(2, 40, 5, 2, 0), None),  # 50 spent, 25 a row
        (JudgeBudget(max_cost=100, prices=PRICES), JudgeSpent(2, 40, 5, 2, 1), None),  # 50 + 25 + 25 = 100
        (JudgeBudget(max_cost=100, prices=PRICES), JudgeSpent(2, 40, 5, 2, 2), "--max-cost 100 reached"),
        (JudgeBudget(max_cost=100, prices=PRICES), JudgeSpent(2, 40, 5, 10, 2), "--max-cost 100 reached"),
        (JudgeBudget(max_cost=100, prices=PRICES), JudgeSpent(0, 0, 0, 0, 500), None),  # see must_wait
    ],
)
def test_when_one_more_row_may_be_sent(budget: JudgeBudget, spent: JudgeSpent, why: str | None) -> None:
    assert budget.exhausted(spent) == why


@pytest.mark.parametrize(
    ("evaluations", "tokens"),
    [
        ([{"usage": {"prompt_tokens": 30, "completion_tokens": 4}}], (30, 4)),  # the built-in judge's record
        ([{"response": {"usage": {"input_tokens": 7, "output_tokens": 2}}}], (7, 2)),  # a NeMo Gym judge's
        (
            [{"responses_create_params": {"messages": [{"role": "user", "content": "x" * 40}]}}],
            (COUNT("x" * 40), 0),
        ),  # estimated
        (
            [{"responses_create_params": {"input": [{"role": "user", "content": [{"text": "y" * 8}]}]}}],
            (COUNT("y" * 8), 0),
        ),
        ([{"usage": {"prompt_tokens": 30, "completion_tokens": 4}, "cached": True}], (0, 0)),  # no call, no cost
        (
            [
                {"usage": {"prompt_tokens": 3, "completion_tokens": 1}},
                {"usage": {"prompt_tokens": 5, "completion_tokens": 2}},
            ],
            (8, 3),
        ),
    ],
)
def test_what_a_rows_judge_calls_took(evaluations: list[dict[str, Any]], tokens: tuple[int, int]) -> None:
    made = routed({"reward": 1.0, "judge_evaluations": evaluations})
    assert (made.judge_input_tokens, made.judge_output_tokens) == tokens


@pytest.mark.parametrize(
    ("budget", "spent", "waits"),
    [
        (JudgeBudget(max_cost=1, prices=PRICES), JudgeSpent(0, 0, 0, 0, 0), False),  # the first row goes
        (JudgeBudget(max_cost=1, prices=PRICES), JudgeSpent(0, 0, 0, 0, 1), True),  # the next waits for its cost
        (JudgeBudget(max_cost=1, prices=PRICES), JudgeSpent(0, 0, 0, 5, 1), True),  # cached rows priced nothing
        (JudgeBudget(max_cost=1, prices=PRICES), JudgeSpent(1, 3, 1, 1, 1), False),  # a call's cost is known
        (JudgeBudget(max_calls=5), JudgeSpent(0, 0, 0, 0, 3), False),  # a call budget needs no price
    ],
)
def test_a_cost_budget_holds_rows_back_until_a_call_is_priced(
    budget: JudgeBudget, spent: JudgeSpent, waits: bool
) -> None:
    assert budget.must_wait(spent) is waits
