"""``--max-judge-calls N`` and ``--max-cost X``: when a run stops sending rows to its judges.

Counted as the run counts its judge calls (``lib.routed_row``): the calls behind the rows written to the output,
a verdict from the judge-call cache costing nothing; their cost at the config's ``judge_prices``, from the tokens
the judge reported (else the prompt estimated). A row is sent only while what has been spent, plus what the rows
still in flight are expected to spend (the mean of the rows so far, one call a row until one has settled), stays
under the budget; so a run stops close to its budget, a little over at most, and never starts a row it cannot
pay for. The rows it did not send are left as they were: ``--resume`` (with a larger budget) goes on from there.
"""

from __future__ import annotations

from dataclasses import dataclass

from reverify_assets.config.judge_prices import JudgePrices


@dataclass(frozen=True)
class JudgeSpent:
    calls: int
    input_tokens: int
    output_tokens: int
    rows: int  # the output rows those were spent on
    in_flight: int  # rows sent and not yet settled


@dataclass(frozen=True)
class JudgeBudget:
    max_calls: int | None = None
    max_cost: float | None = None
    prices: JudgePrices | None = None

    def exhausted(self, spent: JudgeSpent) -> str | None:
        """Why no further row may be sent, or None while the budget allows one more."""
        per_row = spent.calls / spent.rows if spent.rows else 1.0
        if self.max_calls is not None and spent.calls + (spent.in_flight + 1) * per_row > self.max_calls:
            return f"--max-judge-calls {self.max_calls} reached"
        if self.max_cost is not None and self.prices is not None:
            cost = self.cost(spent)
            cost_per_row = cost / spent.rows if spent.rows else 0.0
            if cost >= self.max_cost or cost + (spent.in_flight + 1) * cost_per_row > self.max_cost:
                return f"--max-cost {self.max_cost:g} reached"
        return None

    def cost(self, spent: JudgeSpent) -> float:
        return 0.0 if self.prices is None else self.prices.usage_cost(spent.input_tokens, spent.output_tokens)
