"""Where each shard of a rescoring stands, from three batched instance queries (never one per shard).

A shard's results are partitioned by verifier config (see ``defs.rescoring_defs``). A shard is
*materialized* when it has results of the current verifier config, *stale* when it has results of another
config only, *failed* when its latest attempt under the current config failed, *running* when a run holds
it, and *missing* when no config ever scored it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

import dagster as dg


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
    config_hash: str = ""

    def needing_work(self, *states: ShardState) -> list[str]:
        wanted = set(states)
        return [key for key in self.registered if any(key in self.by_state[s] for s in wanted)]


@dataclass(frozen=True)
class ShardPartitions:
    """The partitions of a rescoring's shard assets: registered shards × verifier configs."""

    shards: dg.DynamicPartitionsDefinition
    partitions: dg.MultiPartitionsDefinition
    shard_dimension: str
    config_dimension: str

    def key(self, shard: str, config_hash: str) -> str:
        return dg.MultiPartitionKey({self.shard_dimension: shard, self.config_dimension: config_hash})

    def split(self, key: str) -> tuple[str, str] | None:
        """(shard, config hash) of a partition key; None for a key of another shape (of an older layout)."""
        if key.count("|") != 1:
            return None
        by_dimension = self.partitions.get_partition_key_from_str(key).keys_by_dimension
        return by_dimension[self.shard_dimension], by_dimension[self.config_dimension]


def shard_status(
    instance: dg.DagsterInstance, asset_key: dg.AssetKey, partitions: ShardPartitions, config_hash: str
) -> ShardStatus:
    assert partitions.shards.name is not None
    registered = list(instance.get_dynamic_partitions(partitions.shards.name))
    status = ShardStatus(registered, config_hash=config_hash)
    if not registered:
        return status
    current = {shard: partitions.key(shard, config_hash) for shard in registered}
    attempts = instance.get_status_by_partition(asset_key, list(current.values()), partitions.partitions) or {}
    scored_by: dict[str, set[str]] = {}
    for key in instance.get_materialized_partitions(asset_key):
        if (parts := partitions.split(key)) is not None:
            scored_by.setdefault(parts[0], set()).add(parts[1])
    for shard in registered:
        state = shard_state(attempts.get(current[shard]), scored_by.get(shard, set()), config_hash)
        status.by_state[state].append(shard)
    return status


def shard_state(attempt: dg.AssetPartitionStatus | None, configs: set[str], current: str) -> ShardState:
    if attempt is dg.AssetPartitionStatus.FAILED:
        return ShardState.FAILED
    if attempt is dg.AssetPartitionStatus.IN_PROGRESS:
        return ShardState.RUNNING
    if current in configs or attempt is dg.AssetPartitionStatus.MATERIALIZED:
        return ShardState.MATERIALIZED
    return ShardState.STALE if configs else ShardState.MISSING
