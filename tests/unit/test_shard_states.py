"""A shard's state from its partitions: results of the current config, of another config, of none."""

from __future__ import annotations

import dagster as dg
import pytest
from dagster import AssetPartitionStatus

from reverify_assets.rescoring.status import ShardPartitions, ShardState, shard_state

SHARDS = dg.DynamicPartitionsDefinition(name="test_shards")
PARTITIONS = ShardPartitions(
    SHARDS,
    dg.MultiPartitionsDefinition({"shard": SHARDS, "verifier_config": dg.StaticPartitionsDefinition(["new"])}),
    "shard",
    "verifier_config",
)


@pytest.mark.parametrize(
    ("key", "parts"),
    [
        ("main.s00000|abc123", ("main.s00000", "abc123")),
        ("run-8.s00012|0f", ("run-8.s00012", "0f")),
        ("main.s00000", None),  # a partition of the layout before configs were a dimension
        ("a|b|c", None),
    ],
)
def test_split_partition_keys(key: str, parts: tuple[str, str] | None) -> None:
    assert PARTITIONS.split(key) == parts


def test_key_and_split_agree() -> None:
    assert PARTITIONS.split(PARTITIONS.key("main.s00003", "abc")) == ("main.s00003", "abc")


@pytest.mark.parametrize(
    ("attempt", "configs", "state"),
    [
        (None, set(), ShardState.MISSING),
        (None, {"old"}, ShardState.STALE),
        (None, {"old", "new"}, ShardState.MATERIALIZED),  # an edit undone: the results are there again
        (AssetPartitionStatus.MATERIALIZED, {"new"}, ShardState.MATERIALIZED),
        (AssetPartitionStatus.FAILED, {"old"}, ShardState.FAILED),
        (AssetPartitionStatus.FAILED, set(), ShardState.FAILED),
        (AssetPartitionStatus.IN_PROGRESS, {"old"}, ShardState.RUNNING),
    ],
)
def test_shard_state(attempt: AssetPartitionStatus | None, configs: set[str], state: ShardState) -> None:
    assert shard_state(attempt, configs, "new") is state
