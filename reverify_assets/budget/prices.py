"""``judge_prices``: what a judge's tokens cost, for a dry run's estimate and a run's ``--max-cost``.

A top-level block of the config, not a server's: a price is no part of how a row is graded, so it changes no
verifier config hash. Prices are per million tokens, in whatever currency the user thinks in.

    judge_prices:
      input_per_million_tokens: 0.15
      output_per_million_tokens: 0.60   # optional
      output_tokens_per_call: 200       # optional: what one verdict is expected to take
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from reverify_assets.config.override_paths import JUDGE_PRICES_KEY
from reverify_assets.errors import ConfigError


class JudgePrices(BaseModel):
    model_config = ConfigDict(extra="forbid")

    input_per_million_tokens: float = Field(ge=0)
    output_per_million_tokens: float = Field(default=0.0, ge=0)
    output_tokens_per_call: int = Field(default=0, ge=0)

    def cost(self, prompt_tokens: int, calls: int) -> float:
        """Before a run: its prompts, and ``output_tokens_per_call`` for each call's answer."""
        return self.usage_cost(prompt_tokens, calls * self.output_tokens_per_call)

    def usage_cost(self, input_tokens: int, output_tokens: int) -> float:
        """During a run: the tokens its calls took."""
        return (input_tokens * self.input_per_million_tokens + output_tokens * self.output_per_million_tokens) / 1e6


def judge_prices(config: Mapping[str, Any]) -> JudgePrices | None:
    """The config's prices, or None when it gives none; a bad block is a config error naming the field."""
    block = config.get(JUDGE_PRICES_KEY)
    if block is None:
        return None
    try:
        return JudgePrices.model_validate(block)
    except ValidationError as exc:
        problems, keys = [], []
        for problem in exc.errors():
            where = ".".join([JUDGE_PRICES_KEY, *(str(part) for part in problem["loc"])])
            problems.append(f"`{where}`: {problem['msg']}")
            keys.append(where)
        raise ConfigError(f"config: {'; '.join(problems)}", key=keys[0] if keys else None) from None
