"""``judge_prices`` and the token estimate a dry run prices with."""

from __future__ import annotations

import pytest

from reverify_assets.budget.prices import JudgePrices, judge_prices
from reverify_assets.budget.token_estimate import TokenCounter
from reverify_assets.errors import ConfigError


@pytest.mark.parametrize(
    ("prices", "tokens", "calls", "cost"),
    [
        ({"input_per_million_tokens": 1.0}, 1_000_000, 10, 1.0),
        ({"input_per_million_tokens": 0.15, "output_per_million_tokens": 0.6}, 2_000_000, 100, 0.3),  # no output size
        (
            {"input_per_million_tokens": 0.15, "output_per_million_tokens": 0.6, "output_tokens_per_call": 500},
            2_000_000,
            1000,
            0.3 + 0.3,
        ),
        ({"input_per_million_tokens": 0}, 5, 5, 0.0),
    ],
)
def test_cost(prices: dict[str, float], tokens: int, calls: int, cost: float) -> None:
    assert JudgePrices.model_validate(prices).cost(tokens, calls) == pytest.approx(cost)


@pytest.mark.parametrize(
    ("block", "key"),
    [
        ({}, "judge_prices.input_per_million_tokens"),  # required
        ({"input_per_million_tokens": "cheap"}, "judge_prices.input_per_million_tokens"),  # not a number
        ({"input_per_million_tokens": 1, "output_tokens_per_call": -3}, "judge_prices.output_tokens_per_call"),
        ({"input_per_million_tokens": 1, "per_call": 2}, "judge_prices.per_call"),  # not a field
        ("0.15", "judge_prices"),  # not a mapping
    ],
)
def test_a_bad_block_names_its_field(block: object, key: str) -> None:
    with pytest.raises(ConfigError) as raised:
        judge_prices({"judge_prices": block})
    assert (raised.value.key, raised.value.source) == (key, None)


def test_no_block_no_prices() -> None:
    assert judge_prices({"mcqa": {}}) is None


@pytest.mark.parametrize(("text", "tokens"), [("", 0), ("abc", 1), ("abcd", 1), ("abcde", 2), ("x" * 4000, 1000)])
def test_the_estimate_without_tiktoken(text: str, tokens: int) -> None:
    counter = TokenCounter()
    if not counter.method.startswith("estimated"):
        pytest.skip("tiktoken is installed here: it counts instead")
    assert counter.count(text) == tokens
