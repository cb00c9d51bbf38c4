"""One shard's verify plan, with its problems counted instead of raised so asset checks can gate on them."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from reverify_assets.config.topology import Topology
from reverify_assets.keys.key_index import KEY_COLUMNS, KeyIndex, duplicated_keys
from reverify_assets.run.preparation import InputsIndex, join_and_route


@dataclass(frozen=True)
class ShardPlan:
    plan: pl.DataFrame  # the rows to verify (see join_and_route), sorted by key
    rollouts: int  # rollout rows of the shard, problems included
    missing_inputs: pl.DataFrame  # keys of rollouts with no materialized input row
    duplicate_keys: pl.DataFrame  # keys present twice in the rollouts or in the inputs

    @property
    def is_complete(self) -> bool:
        return self.missing_inputs.is_empty()

    @property
    def has_duplicates(self) -> bool:
        return not self.duplicate_keys.is_empty()


def plan_shard(
    inputs: InputsIndex, rollouts: KeyIndex, tasks: tuple[int, int], topology: Topology, *, check_prompts: bool = True
) -> ShardPlan:
    """Rows of tasks ``[tasks[0], tasks[1])``; rows with a problem are left out of the plan and reported. A
    rollout whose prompt is not its input row's fails the shard (``check_prompts``: see ``join_and_route``)."""
    in_range = (pl.col("task") >= tasks[0]) & (pl.col("task") < tasks[1])
    shard_inputs = inputs.keys.frame.with_columns(inputs.route_of_row).filter(in_range)
    shard_rollouts = rollouts.frame.filter(in_range)
    duplicates = pl.concat([duplicated_keys(shard_inputs), duplicated_keys(shard_rollouts)]).unique().sort(KEY_COLUMNS)
    clean_inputs = shard_inputs.join(duplicates, on=KEY_COLUMNS, how="anti")
    clean_rollouts = shard_rollouts.join(duplicates, on=KEY_COLUMNS, how="anti")
    missing = clean_rollouts.join(clean_inputs, on=KEY_COLUMNS, how="anti").select(KEY_COLUMNS).sort(KEY_COLUMNS)
    joinable = clean_rollouts.join(missing, on=KEY_COLUMNS, how="anti")
    plan = join_and_route(
        InputsIndex(KeyIndex(inputs.keys.path, clean_inputs.drop("route")), clean_inputs["route"], inputs.routes),
        KeyIndex(rollouts.path, joinable),
        topology,
        check_prompts=check_prompts,
    )
    return ShardPlan(plan, shard_rollouts.height, missing, duplicates)


def shard_numbers(rollouts: KeyIndex, shard_tasks: int) -> list[int]:
    return sorted((rollouts.frame["task"] // shard_tasks).unique().to_list())
