"""What ``reverify run`` prints when it is done: the files, the counts, the key metrics."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from reverify_assets.metrics.coverage import Coverage, describe, describe_bounds, total_coverage

if TYPE_CHECKING:  # the summary is also printed by `reverify aggregate`, which never imports Dagster
    from reverify_assets.defs.materialization import MaterializedRun


def print_run_summary(
    run: MaterializedRun, *, recovery: bool, disable_aggregation: bool, judge_cache: Path | None
) -> None:
    verified = run.metadata.get("recovered_rows" if recovery else "reverified_rows", {})
    output = run.metadata.get("merged_rollouts" if recovery else "reverified_rows", {})
    if verified.get("unsafe"):
        print("WARNING: rewards came from servers not declared stateless; files are prefixed with 'unsafe_'.")
    if recovery:
        print(
            f"Seeded {output.get('seeded this run', 0)} successes and recovered {verified.get('rows written', 0)} "
            f"of {verified.get('rows verified', 0)} re-judged rows."
        )
    print(f"Output:   {run.output.path} ({run.output.rows} rows)")
    failures = verified.get("failures by class") or {}
    print(f"Failures: {run.failures.path} ({verified.get('failures', 0)} written this run)")
    if failures:
        by_class = ", ".join(f"{count} {name}" for name, count in failures.items())
        print(f"Rollouts missing from the score: {verified.get('failures', 0)} ({by_class}); see {run.failures.path}")
        print_failure_causes(failures, verified.get("first failure messages") or {})
    print_judge_calls(verified, judge_cache)
    print_requests(verified)
    print_early_stop(verified)
    if (mean := output.get("mean reward")) is not None:
        print(f"Mean reward: {mean:.4f}")
    if disable_aggregation:
        print("Aggregation disabled: run `reverify aggregate` after all shards finish.")
    elif run.metrics is not None:
        print(f"Metrics:  {run.metrics.path}")
        print_metrics_computed(run.metrics.computed_by)
        print_coverage(run.metrics.coverage, run.metrics.provenance)
        for agent, figures in run.metrics.key_metrics.items():
            print(f"  {agent}: {orjson.dumps(figures).decode()}")
    if verified.get("unsafe"):
        print("WARNING: this output is unsafe: the verifier may need per-rollout state that reverification lacks.")
    print(f"Dagster run: {run.run_id}")


SHOWN_FAILURE_CAUSES = 5


def print_judge_calls(verified: dict[str, Any], judge_cache: Path | None) -> None:
    calls, hits = verified.get("judge calls", 0), verified.get("judge cache hits", 0)
    if not (calls or hits):
        return
    tokens = (
        f" ({verified.get('judge input tokens', 0):,} input, {verified.get('judge output tokens', 0):,} output tokens)"
    )
    made = f"{calls} made{tokens if calls else ''}"
    if judge_cache is None:
        print(f"Judge calls: {made} (the judge-call cache is off)")
    else:
        print(f"Judge calls: {made}, {hits} answered by the judge-call cache ({judge_cache})")


def print_requests(verified: dict[str, Any]) -> None:
    """How each server's rows were sent: a batch route, or one request a row (a server at a `url:`, or one whose
    ``verify`` needs the HTTP request)."""
    if routes := verified.get("requests"):
        print("Requests: " + "; ".join(f"{server} by {route}" for server, route in sorted(routes.items())))


def print_metrics_computed(computed_by: dict[str, str]) -> None:
    """Where the metrics of a server that is not built in were computed: here, with NeMo Gym's own servers' hooks
    run by them, or by a server's ``/aggregate_metrics`` (said only then: a built-in server's are always here)."""
    if any(how != "here" for how in computed_by.values()):
        print("Metrics computed: " + "; ".join(f"{server} {how}" for server, how in sorted(computed_by.items())))


def print_early_stop(verified: dict[str, Any]) -> None:
    if (why := verified.get("stopped by")) is None:
        return
    print(
        f"Stopped early: {why}; {verified.get('rows left unsent', 0)} rows were not sent. Run the same command with "
        "--resume (and a larger budget) to score them."
    )


def print_failure_causes(by_class: dict[str, int], first_messages: dict[str, str]) -> None:
    """The commonest failure classes with the first message of each: the cause, on screen, not only in the
    sidecar."""
    print("Top failure causes:")
    for name, count in sorted(by_class.items(), key=lambda item: (-item[1], item[0]))[:SHOWN_FAILURE_CAUSES]:
        print(f"  {count} {name}: {first_messages.get(name, '(no message)')}")
    if (more := len(by_class) - SHOWN_FAILURE_CAUSES) > 0:
        print(f"  … and {more} more class{'es' if more > 1 else ''}")


def print_coverage(coverage: dict[str, dict[str, Any]], provenance: dict[str, dict[str, Any]]) -> None:
    """``Metrics cover 25 of 37 rollouts (12 judge_failed): incomplete`` (``180 rollouts (expected total
    unknown)`` when the plan is not known), how far the lost rows could move the mean, each agent's coverage
    when there are several, and the verifier configs when rows mix them."""
    total = total_coverage(coverage.values())
    print(f"Metrics cover {describe(total)}{': incomplete' if total.lost else ''}")
    if bounds := describe_bounds(total):
        print(f"  {bounds}")
    if len(coverage) > 1 and not total.complete:
        for agent, block in coverage.items():
            print(f"  {agent} covers {describe(Coverage.from_block(block))}")
    configs: Counter[str] = Counter()
    for block in provenance.values():
        configs.update(block.get("rows_by_config") or {})
    if len(configs) > 1:
        listed = ", ".join(f"{config} ({rows} rows)" for config, rows in configs.most_common())
        print(f"WARNING: the metrics mix rows scored by {len(configs)} verifier configs: {listed}")
