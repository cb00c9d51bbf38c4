"""Where each shard of a rescoring stands, from three batched instance queries (never one per shard).

A shard is *materialized* when its latest materialization was made by the current verifier config,
*stale* when it was made by another one, *failed* when its latest attempt failed, *running* when a
run holds it, and *missing* when it was never materialized.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

import dagster as dg
from dagster._core.definitions.data_version import CODE_VERSION_TAG
from dagster._core.events import DagsterEventType
from dagster._core.storage.partition_status_cache import AssetPartitionStatus


class ShardState(StrEnum):
    MATERIALIZED = "materialized"
    STALE = "stale"
    FAILED = "failed"
    RUNNING = "running"
    MISSING = "missing"


@dataclass
class ShardStatus:
    registered: list[str]
    by_state: dict[ShardState, list[str]] = field(default_factory=lambda: {state: [] for state in ShardState})
    code_version: str = ""

    def needing_work(self, *states: ShardState) -> list[str]:
        wanted = set(states)
        return [key for key in self.registered if any(key in self.by_state[s] for s in wanted)]


def shard_status(
    instance: dg.DagsterInstance,
    asset_key: dg.AssetKey,
    partitions_def: dg.DynamicPartitionsDefinition,
    code_version: str,
) -> ShardStatus:
    assert partitions_def.name is not None
    registered = list(instance.get_dynamic_partitions(partitions_def.name))
    status = ShardStatus(registered, code_version=code_version)
    if not registered:
        return status
    versions = _latest_code_versions(instance, asset_key, registered)
    attempts = instance.get_status_by_partition(asset_key, registered, partitions_def) or {}
    for key in registered:
        status.by_state[_state(attempts.get(key), versions.get(key), code_version)].append(key)
    return status


def _latest_code_versions(instance: dg.DagsterInstance, asset_key: dg.AssetKey, shards: list[str]) -> dict[str, str]:
    """The code version of each shard's latest materialization: one query for the ids, one for the records."""
    latest = instance.event_log_storage.get_latest_storage_id_by_partition(
        asset_key, DagsterEventType.ASSET_MATERIALIZATION, set(shards)
    )
    if not latest:
        return {}
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=asset_key, storage_ids=list(latest.values())), limit=len(latest)
    ).records
    versions = {}
    for record in records:
        materialization = record.asset_materialization
        if materialization is not None and materialization.partition is not None:
            versions[materialization.partition] = (materialization.tags or {}).get(CODE_VERSION_TAG, "")
    return versions


def _state(attempt: AssetPartitionStatus | None, made_by: str | None, current: str) -> ShardState:
    if attempt is AssetPartitionStatus.FAILED:
        return ShardState.FAILED
    if attempt is AssetPartitionStatus.IN_PROGRESS:
        return ShardState.RUNNING
    if made_by is None:
        return ShardState.MISSING
    return ShardState.MATERIALIZED if made_by == current else ShardState.STALE
