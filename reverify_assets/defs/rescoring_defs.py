"""One asset group per rescoring in ``configs/rescorings``: sharded, stale-aware, gated by checks.

    shard_payloads ─> reverified_shard + shard_failures ─> aggregate_metrics
    (partitioned by shard; the verify step's code_version is the verifier config hash)

Outputs sit under ``<output_dir>/<config hash>/``, so results of an older verifier config stay beside
the new ones instead of being overwritten.
"""

import hashlib
import logging
import os
from collections import Counter
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg
import polars as pl
from dagster._core.definitions.unresolved_asset_job_definition import UnresolvedAssetJobDefinition

from reverify_assets.defs.handles import OutputHandle, PlanHandle, content_version
from reverify_assets.defs.metadata import (
    aggregate_metadata,
    key_metrics_table,
    sidecar_metadata,
    stored_flips_metadata,
)
from reverify_assets.errors import ReverifyError
from reverify_assets.lib.atomic_files import write_bytes_atomic, write_parquet_atomic
from reverify_assets.lib.failed_keys import count_by_class, read_failed_keys
from reverify_assets.lib.file_names import sidecar_path
from reverify_assets.lib.key_index import KEY_COLUMNS, scan_keys
from reverify_assets.lib.resume_cache import KEY_SCHEMA, max_attempts_from
from reverify_assets.pipeline.aggregation_rows import rows_of_shards
from reverify_assets.pipeline.coverage_count import CoverageSources, PlannedKeys
from reverify_assets.pipeline.metrics_step import run_aggregation
from reverify_assets.pipeline.output_files import OutputPolicy
from reverify_assets.pipeline.output_flips import tally_output_flips
from reverify_assets.pipeline.output_summary import OutputSummary, summarize_output
from reverify_assets.pipeline.preparation import VerifierSetup, load_verifier_setup
from reverify_assets.pipeline.shard_merge import index_shards
from reverify_assets.pipeline.verification import VerifyStep, run_verification
from reverify_assets.rescoring.index_cache import IndexCache
from reverify_assets.rescoring.shard_keys import parse_shard_key, task_range
from reverify_assets.rescoring.shard_plan import plan_shard
from reverify_assets.rescoring.sources import discover_sources, source_by_id
from reverify_assets.rescoring.spec import RescoringSpec

VERIFIER_POOL = "verifier"
JOIN_COMPLETE = "join_complete"
NO_DUPLICATE_KEYS = "no_duplicate_keys"
FAILURE_RATE = "failure_rate_within_limit"
ONE_CONFIG = "one_verifier_config"
RESCORING_TAG = "reverify/rescoring"  # on every shard run, however launched
log = logging.getLogger("reverify")


@dataclass(frozen=True)
class RescoringLayout:
    """Where one rescoring keeps its files, for one verifier config."""

    spec: RescoringSpec
    config_hash: str
    variant: str | None = None

    @property
    def results(self) -> Path:
        variant_dir = self.spec.outputs / self.variant if self.variant else self.spec.outputs
        return variant_dir / self.config_hash

    def shard_output(self, shard: str) -> Path:
        return self.results / "shards" / f"{shard}.jsonl"

    def plan(self, shard: str) -> Path:
        return self.results / "plans" / f"{shard}.parquet"

    @property
    def merged(self) -> Path:
        return self.results / "merged.jsonl"

    @property
    def index_cache(self) -> IndexCache:
        return IndexCache(self.spec.outputs / "index_cache")


@dataclass(frozen=True)
class RescoringDefs:
    spec: RescoringSpec
    variant: str | None
    label: str  # the rescoring's name, or <name>__<variant>: names its group, op, jobs and schedule
    setup: VerifierSetup
    layout: RescoringLayout
    shards: dg.DynamicPartitionsDefinition
    payloads_key: dg.AssetKey
    reverified_key: dg.AssetKey
    failures_key: dg.AssetKey
    aggregate_key: dg.AssetKey
    assets: list[dg.AssetsDefinition]
    shard_job: UnresolvedAssetJobDefinition
    aggregate_job: UnresolvedAssetJobDefinition

    @property
    def shard_asset_keys(self) -> list[dg.AssetKey]:
        return [self.payloads_key, self.reverified_key, self.failures_key]


def build_rescoring_variants(spec: RescoringSpec) -> list[RescoringDefs]:
    """One asset group per verifier variant, all on the same shards."""
    return [build_rescoring(spec, variant) for variant in spec.variant_names]


def build_rescoring(spec: RescoringSpec, variant: str | None = None) -> RescoringDefs:
    setup = load_verifier_setup(*spec.verifier_of(variant))
    layout = RescoringLayout(spec, setup.config_hash, variant)
    name = spec.name if variant is None else f"{spec.name}__{variant}"
    prefix = [spec.name] if variant is None else [spec.name, variant]
    shards = dg.DynamicPartitionsDefinition(name=f"{spec.name}_shards")  # shared by every variant
    payloads_key, reverified_key = dg.AssetKey([*prefix, "shard_payloads"]), dg.AssetKey([*prefix, "reverified_shard"])
    failures_key, aggregate_key = dg.AssetKey([*prefix, "shard_failures"]), dg.AssetKey([*prefix, "aggregate_metrics"])

    @dg.asset(
        key=payloads_key,
        group_name=name,
        partitions_def=shards,
        description=f"{spec.description}\n\nOne shard's /verify requests: its rollouts joined to their inputs.",
        check_specs=[
            dg.AssetCheckSpec(
                JOIN_COMPLETE,
                asset=payloads_key,
                blocking=True,
                description="every rollout of the shard has its materialized input row",
            ),
            dg.AssetCheckSpec(
                NO_DUPLICATE_KEYS,
                asset=payloads_key,
                blocking=True,
                description="no (task, rollout) key appears twice in the rollouts or the inputs",
            ),
        ],
    )
    def shard_payloads(context: dg.AssetExecutionContext) -> Iterator[Any]:
        source_name, number = parse_shard_key(context.partition_key)
        source = source_by_id(spec, source_name)
        cache = layout.index_cache
        shard = plan_shard(
            cache.inputs(source.inputs),
            cache.rollouts(source.rollouts),
            task_range(number, spec.shard_tasks),
            setup.topology,
        )
        target = layout.plan(context.partition_key)
        target.parent.mkdir(parents=True, exist_ok=True)
        write_parquet_atomic(shard.plan, target)
        yield dg.Output(
            PlanHandle(
                inputs=str(source.inputs),
                rollouts=str(source.rollouts),
                plan=str(target),
                rows=shard.plan.height,
                config_hash=setup.config_hash,
            ),
            metadata={
                "rows": shard.plan.height,
                "rollouts in shard": shard.rollouts,
                "tasks": f"{task_range(number, spec.shard_tasks)[0]}..{task_range(number, spec.shard_tasks)[1] - 1}",
                "rollouts file": dg.MetadataValue.path(str(source.rollouts)),
            },
            data_version=content_version(target),
        )
        yield dg.AssetCheckResult(
            check_name=JOIN_COMPLETE,
            passed=shard.is_complete,
            metadata={
                "rollouts without input": shard.missing_inputs.height,
                "first": _first_keys(shard.missing_inputs),
            },
        )
        yield dg.AssetCheckResult(
            check_name=NO_DUPLICATE_KEYS,
            passed=not shard.has_duplicates,
            metadata={"duplicated keys": shard.duplicate_keys.height, "first": _first_keys(shard.duplicate_keys)},
        )

    @dg.multi_asset(
        name=f"{name}__reverify_shard",  # op names are global to the code location: one per rescoring
        group_name=name,
        partitions_def=shards,
        pool=VERIFIER_POOL,
        ins={"payloads": dg.AssetIn(key=payloads_key)},
        outs={
            "reverified": dg.AssetOut(
                key=reverified_key,
                code_version=setup.config_hash,
                description="The shard's reverified rows, sorted by key.",
            ),
            "failures": dg.AssetOut(
                key=failures_key, code_version=setup.config_hash, description="The shard's failures sidecar."
            ),
        },
        check_specs=[
            dg.AssetCheckSpec(
                FAILURE_RATE,
                asset=reverified_key,
                blocking=True,
                description=f"at most {spec.max_failure_rate:.1%} of the shard's rows failed to score",
            ),
        ],
    )
    def reverify_shard(context: dg.AssetExecutionContext, payloads: PlanHandle) -> Iterator[Any]:
        """Every /verify call of one shard, asyncio in this one step; resumes what a failed attempt left."""
        output = layout.shard_output(context.partition_key)
        plan = pl.read_parquet(payloads.plan)
        restart_if_data_changed(output, shard_data_fingerprint(payloads, plan))
        step = VerifyStep(
            inputs=Path(payloads.inputs),
            responses=Path(payloads.rollouts),
            output=output,
            policy=OutputPolicy(resume=True, max_attempts=max_attempts_from(None), announce_resume=False),
            concurrency=spec.concurrency,
        )
        result = run_verification(plan, setup, step)
        # Against the rewards the rollouts stored: counted in the verify loop, read again (in the same pass as
        # the summary) only when an earlier attempt wrote rows of this shard too.
        if result.skipped:
            whole = OutputSummary()
            flips = tally_output_flips(output, plan, step.responses, whole)
        else:
            whole, flips = summarize_output(output), result.stats.stored_flips
        by_class = unresolved_failures(output)
        failures = by_class.total()
        rate = failures / max(1, whole.rows + failures)
        metadata: dict[str, Any] = {
            "file": dg.MetadataValue.path(str(output)),
            "rows": whole.rows,
            "failures": failures,
            "failures by class": dg.MetadataValue.json(dict(by_class.most_common())),
            "rows verified this run": result.stats.verified,
            "verifier config hash": setup.config_hash,
        }
        if whole.mean_reward is not None:
            metadata["mean reward"] = dg.MetadataValue.float(whole.mean_reward)
        metadata.update(stored_flips_metadata(flips))
        yield dg.Output(
            OutputHandle(path=str(output), rows=whole.rows, config_hash=setup.config_hash),
            output_name="reverified",
            metadata=metadata,
            data_version=content_version(output),
        )
        yield dg.Output(
            OutputHandle(path=str(result.files.sidecar), rows=failures, config_hash=setup.config_hash),
            output_name="failures",
            metadata=sidecar_metadata(result.files.sidecar, result.stats, setup.config_hash),
            data_version=content_version(result.files.sidecar),
        )
        yield dg.AssetCheckResult(
            check_name=FAILURE_RATE,
            passed=rate <= spec.max_failure_rate,
            metadata={"failure rate": dg.MetadataValue.float(rate), "limit": spec.max_failure_rate},
        )

    @dg.asset(
        key=aggregate_key,
        group_name=name,
        deps=[reverified_key],
        description="NeMo Gym's aggregate metrics over every current shard, merged in key order.",
        check_specs=[
            dg.AssetCheckSpec(
                ONE_CONFIG,
                asset=aggregate_key,
                description="every merged row was scored by the current verifier config",
            )
        ],
    )
    def aggregate_metrics(context: dg.AssetExecutionContext) -> Iterator[Any]:
        registered = context.instance.get_dynamic_partitions(shards.name)
        included, excluded, over_limit = _gated_shards(layout, registered, spec.max_failure_rate)
        if not included:
            raise dg.Failure(f"no shard of {name!r} has results for verifier config {setup.config_hash} yet")
        outputs = [layout.shard_output(shard) for shard in included]
        summary = OutputSummary()  # of the merged file, counted as the metrics read it
        rows = summary.count_passing(rows_of_shards(index_shards(outputs), outputs, layout.merged))
        metrics_path = layout.merged.with_name("merged_aggregate_metrics.json")
        # The coverage counts every registered shard's plan: a shard left out is missing from the metrics, but
        # the failures of one left out for its failure rate are known (its files are sound) and count as failed.
        sidecars = [sidecar_path(layout.shard_output(shard)) for shard in [*included, *over_limit]]
        sources = CoverageSources.of(sidecars, _planned_keys(layout, registered))
        with closing(rows):
            entries = run_aggregation(rows, setup, metrics_path, sources) or []
        metadata = aggregate_metadata(metrics_path, entries, setup.config_hash) if entries else {}
        metadata.update(
            {
                "merged file": dg.MetadataValue.path(str(layout.merged)),
                "rows": summary.rows,
                "shards included": len(included),
                "shards registered": len(registered),
                "shards left out": dg.MetadataValue.json(excluded),
                "key metrics": dg.MetadataValue.md(key_metrics_table(entries)),
            }
        )
        yield dg.Output(None, metadata=metadata, data_version=content_version(layout.merged))
        configs = summary.known_configs
        yield dg.AssetCheckResult(
            check_name=ONE_CONFIG,
            passed=configs == [setup.config_hash],
            severity=dg.AssetCheckSeverity.WARN,
            metadata={"rows by verifier config": dg.MetadataValue.json(dict(summary.rows_by_config))},
        )

    return RescoringDefs(
        spec=spec,
        variant=variant,
        label=name,
        setup=setup,
        layout=layout,
        shards=shards,
        payloads_key=payloads_key,
        reverified_key=reverified_key,
        failures_key=failures_key,
        aggregate_key=aggregate_key,
        assets=[shard_payloads, reverify_shard, aggregate_metrics],
        shard_job=dg.define_asset_job(
            f"{name}_shards_job",
            selection=[payloads_key, reverified_key, failures_key],  # partitioned by shard, as the job is
            tags={RESCORING_TAG: name},
        ),
        aggregate_job=dg.define_asset_job(f"{name}_aggregate_job", selection=[aggregate_key]),
    )


def shard_data_fingerprint(payloads: PlanHandle, plan: pl.DataFrame) -> str:
    """Which rows, from which file versions, a shard's results were scored from."""
    digest = hashlib.sha256()
    for path in (payloads.inputs, payloads.rollouts):
        stat = os.stat(path)
        digest.update(f"{path}|{stat.st_size}|{stat.st_mtime_ns}|{stat.st_ino}\n".encode())
    digest.update(plan.select(KEY_COLUMNS).write_csv().encode())
    return digest.hexdigest()[:16]


def restart_if_data_changed(output: Path, fingerprint: str) -> None:
    """Shards resume what an earlier attempt left; not when the rollouts or the shard's tasks changed since."""
    marker = output.with_name(f"{output.name}.source")
    if marker.exists() and marker.read_text().strip() != fingerprint:
        for stale in (output, sidecar_path(output)):
            stale.unlink(missing_ok=True)
    marker.parent.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(marker, f"{fingerprint}\n".encode())


def _gated_shards(
    layout: RescoringLayout, registered: list[str], limit: float
) -> tuple[list[str], dict[str, str], list[str]]:
    """Shards with current results and a failure rate within the limit; the others, with the reason; and of
    those, the ones left out for their failure rate."""
    included, excluded, over_limit = [], {}, []
    for shard in registered:
        output = layout.shard_output(shard)
        if not output.exists():
            excluded[shard] = "no results for this verifier config"
            continue
        try:
            rows, failed = _count_lines(output), unresolved_failures(output).total()
        except ReverifyError as exc:  # one damaged shard is left out, not the whole aggregate failed
            excluded[shard] = str(exc)
            continue
        if failed / max(1, rows + failed) > limit:
            excluded[shard] = f"{failed} failed rows of {rows + failed} is over the limit of {limit:.1%}"
            over_limit.append(shard)
            continue
        included.append(shard)
    return included, excluded, over_limit


def _planned_keys(layout: RescoringLayout, shards: list[str]) -> list[PlannedKeys] | None:
    """The keys every registered shard planned; None (unknown) when a shard has no plan for this config yet."""
    inputs = {source.id: source.inputs for source in discover_sources(layout.spec)}
    planned = []
    for shard in shards:
        plan, source = layout.plan(shard), parse_shard_key(shard)[0]
        if not plan.exists() or source not in inputs:
            return None
        planned.append(PlannedKeys.read_plan(Path(plan), Path(inputs[source])))
    return planned


def unresolved_failures(output: Path) -> Counter[str]:
    """Keys of the sidecar that no later attempt scored, by their last attempt's class: a key fails once per
    attempt, and counts once."""
    failed = read_failed_keys(sidecar_path(output))
    if failed and output.exists() and output.stat().st_size:
        keys = pl.DataFrame({"task": [k[0] for k in failed], "rollout": [k[1] for k in failed]}, schema=KEY_SCHEMA)
        scored = keys.join(scan_keys(output).frame.select(KEY_COLUMNS), on=KEY_COLUMNS, how="semi")
        for key in scored.iter_rows():
            del failed[key]
    return count_by_class(failed.values())


def _count_lines(path: Path) -> int:
    if not path.exists():
        return 0
    with open(path, "rb") as fh:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))


def _first_keys(keys: pl.DataFrame, limit: int = 5) -> str:
    return ", ".join(f"({t}, {r})" for t, r in keys.head(limit).iter_rows()) or "none"
