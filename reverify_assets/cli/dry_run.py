"""``reverify run --dry-run``: the census of what the run would verify and spend (``run.census``), printed."""

from __future__ import annotations

from reverify_assets.budget.prices import JudgePrices, judge_prices
from reverify_assets.config.override_paths import JUDGE_PRICES_KEY
from reverify_assets.run.census import Census, take_census
from reverify_assets.run.options import RunOptions
from reverify_assets.run.preparation import VerifierSetup


def dry_run(options: RunOptions, setup: VerifierSetup) -> None:
    prices = judge_prices(setup.config)  # a bad price block is said before the rows are read
    print_census(take_census(options, setup), prices)


def print_census(census: Census, prices: JudgePrices | None) -> None:
    print("Dry run: nothing was written and no server was started.")
    print(f"Rows to verify: {census.rows:,}")
    for (server, agent), rows in sorted(census.to_verify.items()):
        print(f"  {rows:,} by {server!r} for agent {agent!r}")
    if census.skipped:
        print(f"Rows skipped: {sum(census.skipped.values()):,}")
        for reason, rows in census.skipped.items():
            print(f"  {rows:,} {reason}")
    if not census.judges:
        print("Judge calls: none (no judge server in the config)")
        return
    calls = sum(spend.calls for spend in census.judges.values())
    calls_at_most = sum(spend.calls_at_most for spend in census.judges.values())
    tokens = sum(spend.prompt_tokens for spend in census.judges.values())
    tokens_at_most = sum(spend.prompt_tokens_at_most for spend in census.judges.values())
    second = " (the most: a second call wherever a row's first verdict may need one)" if calls_at_most > calls else ""
    print(f"Judge calls: {_span(calls, calls_at_most)}{second}")
    print(f"Prompt tokens: {_span(tokens, tokens_at_most)}, {census.token_method}")
    for name, spend in sorted(census.judges.items()):
        how = "estimated from the rows' question, expected answer and response" if spend.estimated_from_rows else ""
        refused = f"; {spend.rows_refused:,} rows it would refuse (HTTP 422), no call" if spend.rows_refused else ""
        shown = f" ({how})" if how else ""
        spent = f"{_span(spend.calls, spend.calls_at_most)} calls, "
        spent += f"{_span(spend.prompt_tokens, spend.prompt_tokens_at_most)} tokens"
        print(f"  {name!r}: {spent}{shown}{refused}")
    if prices is None:
        print(f"Cost: no prices in the config (a top-level `{JUDGE_PRICES_KEY}:` block gives them)")
        return
    low, high = prices.cost(tokens, calls), prices.cost(tokens_at_most, calls_at_most)
    output = (
        f" + {prices.output_tokens_per_call:,} output tokens a call at {prices.output_per_million_tokens:g}/M"
        if prices.output_tokens_per_call and prices.output_per_million_tokens
        else ""
    )
    shown = f"{low:,.2f}" if low == high else f"{low:,.2f} to {high:,.2f}"
    print(f"Cost: {shown} (prompt tokens at {prices.input_per_million_tokens:g}/M{output})")


def _span(low: int, high: int) -> str:
    return f"{low:,}" if low == high else f"{low:,} to {high:,}"
