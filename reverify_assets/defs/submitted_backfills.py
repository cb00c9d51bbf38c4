"""Rescoring backfills submitted to the Dagster instance (``reverify backfill NAME --submit``): a real partition
backfill that the instance's daemon runs under its run queue, launcher and executor, on whatever machines those
put the steps, and how far one has got.

A backfill targets the shards' assets for the chosen shards and, downstream of them, the rescoring's aggregate:
one backfill does what a local ``reverify backfill`` does, and while it is in progress the aggregate's
automation condition leaves the aggregate to it.
"""

from __future__ import annotations

import random
import re
import string
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import dagster as dg

# Dagster 1.13's public API has no way to create a backfill: its UI's GraphQL mutation (which needs a running
# webserver) builds a PartitionBackfill with this constructor and stores it with ``add_backfill``, as here.
from reverify_assets.defs.dagster_internals import BULK_ACTION_TERMINAL_STATUSES, BulkActionStatus, PartitionBackfill
from reverify_assets.defs.rescoring_defs import SHARD_TAG, RescoringDefs

BACKFILL_TAG = "dagster/backfill"  # Dagster's tag on every run a backfill launches
ENDED = set(BULK_ACTION_TERMINAL_STATUSES)
BACKFILL_DAEMON = "BACKFILL"  # the daemon type Dagster records the backfill loop's heartbeats under
# Four of the daemon's heartbeats (one every 30 s): Dagster's own tolerance, 30 minutes, is for its status page.
DAEMON_SILENT_S = 120.0
_RUNNING = {dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.CANCELING}
_FAILED = {dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED}


def submit_backfill(
    instance: dg.DagsterInstance,
    rescoring: RescoringDefs,
    shards: Sequence[str],
    tags: Mapping[str, str],
    *,
    aggregate: bool = True,
    run_config: Mapping[str, Any] | None = None,
) -> str:
    """Stores a backfill of ``shards`` (registered), and of the aggregate unless ``aggregate`` is False, for the
    daemon; its id. ``run_config``: its runs' (None: the code location's defaults)."""
    submitted_at = time.time()
    backfill_id = _new_backfill_id(instance)
    backfill = PartitionBackfill.from_asset_partitions(
        backfill_id=backfill_id,
        asset_graph=dg.Definitions(assets=rescoring.assets).resolve_asset_graph(),
        partition_names=[rescoring.partition_key(shard) for shard in shards],
        asset_selection=[*rescoring.shard_asset_keys, *([rescoring.aggregate_key] if aggregate else [])],
        backfill_timestamp=submitted_at,
        # The rescoring's own tags, which its jobs' runs carry (the deployment's run limits per rescoring count
        # them): a backfill's runs are of Dagster's asset job, not of those jobs.
        tags={**rescoring.shard_job.tags, **tags},
        dynamic_partitions_store=instance,
        all_partitions=False,
        title=f"reverify backfill {rescoring.label}",
        description=f"{len(shards)} shards of {rescoring.label}{' and its aggregate' if aggregate else ''}, "
        f"verifier config {rescoring.setup.config_hash}",
        run_config=run_config,
    )
    instance.add_backfill(backfill)
    return backfill_id


def backfill_daemon_heard(instance: dg.DagsterInstance) -> float | None:
    """Seconds since the instance's backfill daemon last said it is alive (None: never); past
    ``DAEMON_SILENT_S`` it is taken for gone, and a backfill submitted now would wait for nobody."""
    heartbeat = instance.get_daemon_heartbeats().get(BACKFILL_DAEMON)
    return None if heartbeat is None else max(0.0, time.time() - heartbeat.timestamp)


def _new_backfill_id(instance: dg.DagsterInstance) -> str:
    """Eight lowercase letters, as Dagster names its own backfills, not taken yet."""
    while True:
        candidate = "".join(random.choices(string.ascii_lowercase, k=8))
        if instance.get_backfill(candidate) is None:
            return candidate


@dataclass(frozen=True)
class BackfillProgress:
    """Where a submitted backfill stands: its status, its shards by the state of their latest run, the
    aggregate's, and the rows its shards have re-scored so far."""

    status: BulkActionStatus
    shards: int
    done: list[str]
    failed: list[str]
    running: list[str]  # the others wait: queued, or not launched yet
    aggregate: dg.DagsterRunStatus | None  # of the aggregate's latest run; None before it is launched
    rows: int
    seconds: float  # since the backfill was submitted
    error: str | None = None  # the first line of what stopped Dagster's iterations over it, if something did

    @property
    def ended(self) -> bool:
        return self.status in ENDED

    @property
    def succeeded(self) -> bool:
        # COMPLETED: what Dagster wrote before it told success from failure (COMPLETED_FAILED).
        return self.status in (BulkActionStatus.COMPLETED_SUCCESS, BulkActionStatus.COMPLETED)

    def counts(self) -> tuple[object, ...]:
        """What changes when the backfill moves on (the rate alone changes every second)."""
        return self.status, len(self.done), len(self.failed), len(self.running), self.rows, self.aggregate

    def line(self) -> str:
        rate = f"{self.rows / self.seconds:,.0f} rows/s" if self.seconds > 0 else "—"
        waiting = self.shards - len(self.done) - len(self.failed) - len(self.running)
        parts = [
            f"{len(self.done)}/{self.shards} shards done",
            f"{len(self.failed)} failed",
            f"{len(self.running)} running",
            f"{waiting} waiting",
            f"{self.rows:,} rows, {rate}",
        ]
        if self.aggregate is not None:
            parts.append(f"aggregate {self.aggregate.value.lower()}")
        return f"[{self.status.value.lower()}] " + ", ".join(parts)


def backfill_progress(instance: dg.DagsterInstance, backfill_id: str, rescoring: RescoringDefs) -> BackfillProgress:
    backfill = instance.get_backfill(backfill_id)
    if backfill is None:
        raise LookupError(backfill_id)
    runs = instance.get_runs(filters=dg.RunsFilter(tags={BACKFILL_TAG: backfill_id}))  # newest first
    latest: dict[str, dg.DagsterRun] = {}
    aggregate: dg.DagsterRun | None = None
    for run in runs:
        shard = run.tags.get(SHARD_TAG)
        if shard is not None:
            latest.setdefault(shard, run)
        elif aggregate is None:
            aggregate = run
    by_state: dict[str, list[str]] = {"done": [], "failed": [], "running": []}
    for shard, run in sorted(latest.items()):
        if run.status == dg.DagsterRunStatus.SUCCESS:
            by_state["done"].append(shard)
        elif run.status in _FAILED:
            by_state["failed"].append(shard)
        elif run.status in _RUNNING:
            by_state["running"].append(shard)
    return BackfillProgress(
        status=backfill.status,
        shards=_targeted_shards(backfill, rescoring),
        aggregate=None if aggregate is None else aggregate.status,
        rows=_rows_scored(instance, rescoring, {run.run_id for run in latest.values()}, backfill.backfill_timestamp),
        seconds=max(0.0, time.time() - backfill.backfill_timestamp),
        error=None if backfill.error is None else next(iter(backfill.error.message.strip().splitlines()), None),
        **by_state,
    )


def _targeted_shards(backfill: PartitionBackfill, rescoring: RescoringDefs) -> int:
    data = backfill.asset_backfill_data
    if data is None:
        return 0
    subset = data.target_subset.get_partitions_subset(rescoring.reverified_key)
    return len(subset.get_partition_keys())


def _rows_scored(instance: dg.DagsterInstance, rescoring: RescoringDefs, run_ids: set[str], since: float) -> int:
    """The rows of the shard materializations these runs recorded (their ``rows`` metadata)."""
    rows: Counter[str] = Counter()
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=rescoring.reverified_key, after_timestamp=since), limit=10_000
    ).records
    for record in records:
        materialization = record.asset_materialization
        if record.run_id in run_ids and materialization is not None:
            value = materialization.metadata.get("rows")
            rows[record.run_id] = int(getattr(value, "value", value) or 0)
    return sum(rows.values())


def failure_reasons(instance: dg.DagsterInstance, backfill_id: str) -> dict[str, str]:
    """Each failed shard's reason: the first line of its latest run's first step failure (a step refused by
    our code says our sentence), or the run's own failure (a run whose process died)."""
    latest: dict[str, dg.DagsterRun] = {}
    for run in instance.get_runs(filters=dg.RunsFilter(tags={BACKFILL_TAG: backfill_id})):
        if (shard := run.tags.get(SHARD_TAG)) is not None:
            latest.setdefault(shard, run)
    reasons = {}
    for shard, run in sorted(latest.items()):
        if run.status not in _FAILED:
            continue
        reasons[shard] = next(
            (
                line
                for kind in (dg.DagsterEventType.STEP_FAILURE, dg.DagsterEventType.RUN_FAILURE)
                for record in instance.all_logs(run.run_id, of_type=kind)
                if (line := _first_line(record.dagster_event))
            ),
            run.status.value.lower(),
        )
    return reasons


def _first_line(event: dg.DagsterEvent | None) -> str:
    if event is None:
        return ""
    error = getattr(event.event_specific_data, "error", None)
    # Dagster wraps an error it did not expect in its own ("Error occurred while executing op ..."): the cause
    # says what happened. Our own refusals reach it unwrapped (``defs.failures``).
    while error is not None and error.cls_name == "DagsterExecutionStepExecutionError" and error.cause is not None:
        error = error.cause
    text = (event.message or "") if error is None else error.message
    line = next((line.strip() for line in text.splitlines() if line.strip()), "")
    if error is not None:  # "reverify_assets.errors.ReverifyError: ...": the sentence
        line = re.sub(rf"^[\w.]*\b{re.escape(error.cls_name)}: ", "", line)
    return line
