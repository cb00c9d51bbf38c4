"""``--max-judge-calls N`` and ``--max-cost X``: when a run stops sending rows to its judges.

Counted as the run counts its judge calls (``rows.routed_row``): the calls behind the rows written to the output,
a verdict from the judge-call cache costing nothing; their cost at the config's ``judge_prices``, from the tokens
the judge reported (else the prompt estimated). A row is sent only while what has been spent, plus what the rows
still in flight are expected to spend (at least one call a row, at the mean cost of a call so far; under
``--max-cost``, one row at a time until a call has been priced), stays within the budget; so a run stops at its
budget, over it only by what rows cost beyond the expectation (one row at a time also while every row so far came
from the cache: slower, never over). The calls behind rows that failed (a judge failure after a first, billed
call) are not counted. The rows it did not send are left as they were: ``--resume`` (with a larger budget) goes
on from there.
"""

from __future__ import annotations

from dataclasses import dataclass

from reverify_assets.budget.prices import JudgePrices


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
        # Each row in flight is expected to cost a call at least: rows the cache answered (no call) must not
        # make the rows still out look free.
        calls_per_row = max(1.0, spent.calls / spent.rows) if spent.rows else 1.0
        expected_calls = spent.calls + (spent.in_flight + 1) * calls_per_row
        if self.max_calls is not None and expected_calls > self.max_calls:
            return f"--max-judge-calls {self.max_calls} reached"
        if self.max_cost is not None and self.prices is not None:
            cost = self.cost(spent)
            if cost >= self.max_cost:
                return f"--max-cost {self.max_cost:g} reached"
            if not spent.calls:  # nothing priced yet: see `must_wait`
                return None
            if cost + (spent.in_flight + 1) * calls_per_row * cost / spent.calls > self.max_cost:
                return f"--max-cost {self.max_cost:g} reached"
        return None

    def must_wait(self, spent: JudgeSpent) -> bool:
        """Under ``--max-cost``, no call priced yet and a row out: the next waits for what that one costs."""
        return self.max_cost is not None and not spent.calls and spent.in_flight > 0

    def cost(self, spent: JudgeSpent) -> float:
        return 0.0 if self.prices is None else self.prices.usage_cost(spent.input_tokens, spent.output_tokens)
