"""What a tick of the rescore schedule that asks for no run says, in every state of the shards and the aggregate."""

from __future__ import annotations

import pytest
from dagster import AssetPartitionStatus

from reverify_assets.defs.automation import quiet_tick_reason
from reverify_assets.rescoring.status import ShardState, ShardStatus

CONFIG = "803417109ba2"


def status(registered: int, running: int = 0) -> ShardStatus:
    keys = [f"main.s{n:05d}" for n in range(registered)]
    shards = ShardStatus(keys, config_hash=CONFIG)
    shards.by_state[ShardState.RUNNING] = keys[:running]
    shards.by_state[ShardState.MATERIALIZED] = keys[running:]
    return shards


@pytest.mark.parametrize(
    ("shards", "aggregate", "reason"),
    [
        (status(0), None, f"no shards registered under config {CONFIG} yet: the new-rollouts sensor registers them"),
        (status(3, running=2), None, f"2 of 3 shards running under config {CONFIG}, none to start"),
        (status(3), AssetPartitionStatus.MATERIALIZED, f"all 3 shards current under config {CONFIG}"),
        (
            status(3),
            AssetPartitionStatus.IN_PROGRESS,
            f"all 3 shards current under config {CONFIG}; the aggregate is running",
        ),
        (
            status(3),
            AssetPartitionStatus.FAILED,
            f"all 3 shards current under config {CONFIG}; the aggregate is behind (its last run failed): "
            "reverify_aggregates materializes it after this tick",
        ),
        (
            status(3),
            None,
            f"all 3 shards current under config {CONFIG}; the aggregate is behind (it has no results yet): "
            "reverify_aggregates materializes it after this tick",
        ),
    ],
    ids=["nothing registered", "shards running", "quiet", "aggregate running", "aggregate failed", "no aggregate"],
)
def test_a_tick_without_runs_says_why(shards: ShardStatus, aggregate: AssetPartitionStatus | None, reason: str) -> None:
    assert quiet_tick_reason(shards, aggregate) == reason
