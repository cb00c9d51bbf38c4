"""Registering shards, reporting their state and re-scoring them: in this process, one run per shard, or (with
``--parallel``) as a Dagster backfill hosted here."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import dagster as dg

from reverify_assets.defs.code_location import IN_PROCESS_RUN_CONFIG, run_job
from reverify_assets.defs.comparison_defs import ComparisonDefs
from reverify_assets.defs.dagster_internals import UnresolvedAssetJobDefinition
from reverify_assets.defs.instance import open_dagster_instance
from reverify_assets.defs.log_capture import capture_deaf_to_ctrl_c
from reverify_assets.defs.rescoring_defs import RescoringDefs
from reverify_assets.defs.run_storage import RunScopedIOManager
from reverify_assets.defs.run_tags import COMMAND_TAG, RESCORING_TAG
from reverify_assets.defs.submitted_backfills import BACKFILL_TAG, failure_reasons
from reverify_assets.processes import interrupts
from reverify_assets.rescoring.sources import discover_shard_keys
from reverify_assets.rescoring.status import ShardState, ShardStatus, shard_status

# The rescoring, its variant and config come with the jobs' own tags.
BACKFILL_TAGS = {COMMAND_TAG: "backfill"}


def open_instance() -> dg.DagsterInstance:
    return open_dagster_instance()


def register_shards(rescoring: RescoringDefs) -> list[str]:
    with open_instance() as instance:
        known = set(instance.get_dynamic_partitions(rescoring.shards.name))
        found = discover_shard_keys(rescoring.spec, rescoring.layout.index_cache)
        new = [key for key in found if key not in known]
        if new:
            instance.add_dynamic_partitions(rescoring.shards.name, new)
    print(f"{rescoring.spec.name}: {len(found)} shards ({len(new)} new): {', '.join(found)}")
    return new


def current_status(rescoring: RescoringDefs, instance: dg.DagsterInstance) -> ShardStatus:
    return shard_status(instance, rescoring.reverified_key, rescoring.shard_partitions, rescoring.setup.config_hash)


def print_status(rescoring: RescoringDefs) -> None:
    with open_instance() as instance:
        status = current_status(rescoring, instance)
    print(f"{rescoring.label}: {len(status.registered)} shards, verifier config {status.config_hash}")
    print("  " + ", ".join(f"{state.value} {len(status.by_state[state])}" for state in ShardState))
    for state in (ShardState.STALE, ShardState.FAILED, ShardState.MISSING, ShardState.RUNNING):
        if status.by_state[state]:
            print(f"  {state.value}: {' '.join(status.by_state[state])}")
    if not status.registered:
        print(f"  no shards registered yet: run `reverify shards {rescoring.spec.name}`")


def backfill(
    variants: Sequence[RescoringDefs],
    states: Sequence[ShardState],
    *,
    aggregate: bool,
    parallel: int = 1,
    ui_url: str,
    comparison: ComparisonDefs | None = None,
) -> None:
    """Per variant: its shards in ``states`` re-scored, then the aggregate; after every variant's aggregate, the
    ``comparison`` of the rescoring's variants (of all of them, even when ``variants`` is a few: the others' merged
    outputs are compared as they are).

    One shard at a time, each in a run in this process; with ``parallel`` above 1, as a Dagster backfill whose
    loop and run queue this command hosts (``backfill_submit.run_here``), each run in a process of its own.
    """
    register_shards(variants[0])
    for rescoring in variants:
        with open_instance() as instance:
            todo = current_status(rescoring, instance).needing_work(*states)
        print(f"{rescoring.label}: re-scoring {len(todo)} shards ({', '.join(s.value for s in states)})")
        aggregated: dict[str, Any] | None = None
        if parallel > 1 and len(todo) > 1:
            from reverify_assets.cli.backfill_submit import run_here

            backfill_id = run_here(rescoring, todo, parallel=parallel, aggregate=aggregate, ui_url=ui_url)
            outcomes, aggregated = _stored_outcomes(rescoring, todo, backfill_id)
        else:
            outcomes = [rescore_shard(rescoring, key) for key in todo]
        for key, (_, described) in zip(todo, outcomes, strict=True):
            print(f"  {key}: {described}")
        failed = [key for key, (ok, _) in zip(todo, outcomes, strict=True) if not ok]
        if aggregate:
            if aggregated is None:  # not run here, or not by the backfill (which skips it below a failed shard)
                result = _aggregate(rescoring)
                aggregated = _metadata(result, rescoring.aggregate_key) if result.success else {}
            print(f"  aggregate: {_describe_aggregate(aggregated)}")
        if failed:
            print(f"  failed: {' '.join(failed)} (see `reverify status {rescoring.spec.name}`)")
    if aggregate and comparison is not None:
        print(f"{comparison.label}: {compare_variants(comparison)}")


def _stored_outcomes(
    rescoring: RescoringDefs, shards: Sequence[str], backfill_id: str
) -> tuple[list[tuple[bool, str]], dict[str, Any] | None]:
    """What a backfill's runs recorded: each shard's outcome as ``rescore_shard`` describes it, and the metadata of
    the aggregate it materialized (None: it did not)."""
    with open_instance() as instance:
        reasons = failure_reasons(instance, backfill_id)
        runs = {run.run_id for run in instance.get_runs(filters=dg.RunsFilter(tags={BACKFILL_TAG: backfill_id}))}
        outcomes = []
        for shard in shards:
            meta = _recorded(instance, rescoring.reverified_key, rescoring.partition_key(shard), runs)
            if meta is None:
                outcomes.append((False, f"FAILED ({reasons.get(shard, 'not run: the backfill was stopped')})"))
            else:
                outcomes.append((True, describe_shard(meta)))
        return outcomes, _recorded(instance, rescoring.aggregate_key, rescoring.aggregate_partition, runs)


def _recorded(
    instance: dg.DagsterInstance, key: dg.AssetKey, partition: str, run_ids: set[str]
) -> dict[str, Any] | None:
    """The metadata of the latest materialization of ``key``'s ``partition``, if one of ``run_ids`` recorded it."""
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=key, asset_partitions=[partition]), limit=1
    ).records
    if not records or records[0].run_id not in run_ids or records[0].asset_materialization is None:
        return None
    return {k: getattr(v, "value", v) for k, v in records[0].asset_materialization.metadata.items()}


def compare_variants(comparison: ComparisonDefs) -> str:
    """Materializes the comparison asset; a line saying what it found."""
    spec = comparison.variants[0].spec
    result = _run(spec.root, comparison.assets, comparison.job, tags={RESCORING_TAG: spec.name, **BACKFILL_TAGS})
    if not result.success:
        return f"not computed ({_errors(result) or 'see the run in the UI'})"
    return _describe_comparison(_metadata(result, comparison.key))


def rescore_shard(rescoring: RescoringDefs, key: str) -> tuple[bool, str]:
    """(whether the shard's results were materialized, a line saying what happened)."""
    result = _run(
        rescoring.spec.root,
        rescoring.assets,
        rescoring.shard_job,
        partition_key=rescoring.partition_key(key),
        tags=BACKFILL_TAGS,
    )
    if not result.success:
        return False, f"FAILED ({_errors(result) or 'see the run in the UI'})"
    return _materialized(result, rescoring.reverified_key), describe_shard(_metadata(result, rescoring.reverified_key))


def _aggregate(rescoring: RescoringDefs) -> dg.ExecuteInProcessResult:
    return _run(
        rescoring.spec.root,
        rescoring.assets,
        rescoring.aggregate_job,
        partition_key=rescoring.aggregate_partition,
        tags=BACKFILL_TAGS,
    )


def _run(
    project: Path,
    assets: Sequence[dg.AssetsDefinition],
    job: UnresolvedAssetJobDefinition,
    *,
    tags: Mapping[str, str],
    partition_key: str | None = None,
) -> dg.ExecuteInProcessResult:
    """One in-process run of a job of the code location, on the CLI's instance; a failure is in the result, for
    the caller to describe."""
    with open_instance() as instance:
        capture_deaf_to_ctrl_c(instance)
        try:
            return run_job(
                job,
                assets,
                {"io_manager": RunScopedIOManager()},
                instance,
                project=project,
                run_config=IN_PROCESS_RUN_CONFIG,
                tags=tags,
                partition_key=partition_key,
                raise_on_error=False,
            )
        finally:
            interrupts.reinstate()


def _materialized(result: dg.ExecuteInProcessResult, key: dg.AssetKey) -> bool:
    return any(event.asset_key == key for event in result.get_asset_materialization_events())


def _metadata(result: dg.ExecuteInProcessResult, key: dg.AssetKey) -> dict[str, Any]:
    for event in result.get_asset_materialization_events():
        if event.asset_key == key:
            return {k: getattr(v, "value", v) for k, v in event.materialization.metadata.items()}
    return {}


def _errors(result: dg.ExecuteInProcessResult) -> str:
    return "; ".join(
        _plain(e.event_specific_data.error.message)
        for e in result.all_events
        if e.is_step_failure and e.event_specific_data and e.event_specific_data.error
    )


def describe_shard(meta: Mapping[str, Any]) -> str:
    """A shard's materialization, from its metadata: rows, failures and the mean reward's change."""
    mean, before, delta = meta.get("mean reward"), meta.get("original mean reward"), meta.get("mean reward change")
    change = f", mean reward {mean:.4f}" if mean is not None else ""
    if mean is not None and before is not None and delta is not None:
        change += f" (stored {before:.4f}, {delta:+.4f}"
        if (worse := meta.get("pass→fail vs original")) is not None:
            change += f"; {worse} pass→fail, {meta.get('fail→pass vs original')} fail→pass"
        change += ")"
    return f"{meta.get('rows')} rows, {meta.get('failures')} failures{change}"


def _plain(message: str) -> str:
    """Dagster prefixes the exception's module path; the user needs the sentence."""
    text = " ".join(message.split())
    return text.split(": ", 1)[-1] if text.startswith("dagster.") else text


def _describe_aggregate(meta: Mapping[str, Any]) -> str:
    if not meta:
        return "not computed (no shard has results for this verifier config yet)"
    described = f"{meta.get('rows')} rows from {meta.get('shards included')} shards -> {meta.get('file')}"
    if (cover := meta.get("metrics cover")) is not None:
        described += f"; metrics cover {cover}"
    if (health := meta.get("rollout health")) is not None:
        described += f"\n  {health}"
    return described


def _describe_comparison(meta: dict[str, Any]) -> str:
    """One clause per compared variant: its flips and mean change against the baseline."""
    titles = [name.removesuffix(": compared rows") for name in meta if name.endswith(": compared rows")]
    clauses = []
    for title in titles:
        clause = f"{title}: {meta[f'{title}: compared rows']} rows"
        if (rate := meta.get(f"{title}: flip rate")) is not None:
            clause += (
                f", {meta[f'{title}: pass→fail']} pass→fail, {meta[f'{title}: fail→pass']} fail→pass"
                f" (flip rate {rate:.1%}, McNemar p {meta[f'{title}: McNemar p']:.3g})"
            )
        if (delta := meta.get(f"{title}: mean Δ")) is not None:
            clause += f", mean Δ {delta:+.4f}"
        clauses.append(clause)
    folder = Path(str(meta[f"{titles[0]}: report"])).parent if titles else None
    return "; ".join(clauses) + (f" -> {folder}" if folder else "")
