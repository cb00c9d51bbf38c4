"""A run launched on one output's partition with a resource that writes another output is refused at its first
step, naming both: it would record these files' results as the other output's."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from reverify_assets.cli.aggregate_command import absolute_globs
from reverify_assets.defs.assets import OUTPUTS, materialized_inputs
from reverify_assets.defs.resources import RescoringResource, ShardAggregateResource, startup_resource
from reverify_assets.defs.shard_aggregate_defs import MERGED_OUTPUTS, SHARD_AGGREGATE_RESOURCE, aggregated_shards
from tests.support.cli import CONFORMANCE_INPUTS, CONFORMANCE_ROLLOUTS, MCQA_CONFIG


def refused_message(asset: dg.AssetsDefinition, partitions: str, key: str, resources: dict) -> str:
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(partitions, [key])
        result = dg.materialize(
            [asset],
            instance=instance,
            partition_key=key,
            resources={"startup": startup_resource(), **resources},
            raise_on_error=False,
        )
        assert not result.success
        [failure] = [event for event in result.all_events if event.is_step_failure]
        return failure.step_failure_data.error.message


def test_a_rescoring_on_another_outputs_partition_is_refused(tmp_path: Path) -> None:
    output = tmp_path / "out.jsonl"
    rescoring = RescoringResource(
        inputs=str(CONFORMANCE_INPUTS),
        rollouts=str(CONFORMANCE_ROLLOUTS),
        output=str(output),
        **RescoringResource.config_values([MCQA_CONFIG], []),
    )
    other = str(tmp_path / "other.jsonl")
    message = refused_message(materialized_inputs, OUTPUTS.name, other, {"rescoring": rescoring})
    assert f"this run is of partition {other!r}, but its rescoring resource writes {str(output)!r}" in message
    assert not output.exists()


def test_an_aggregate_on_another_outputs_partition_is_refused(tmp_path: Path) -> None:
    output = tmp_path / "merged.jsonl"
    resource = ShardAggregateResource(
        input_glob=str(CONFORMANCE_ROLLOUTS),
        output=str(output),
        **ShardAggregateResource.config_values([MCQA_CONFIG], []),
    )
    other = str(tmp_path / "other.jsonl")
    message = refused_message(aggregated_shards, MERGED_OUTPUTS.name, other, {SHARD_AGGREGATE_RESOURCE: resource})
    assert f"this run is of partition {other!r}, but its {SHARD_AGGREGATE_RESOURCE} resource writes" in message
    assert not output.exists()


@pytest.mark.parametrize(
    ("given", "made"),
    [
        ("shards/*.jsonl", "{cwd}/shards/*.jsonl"),
        ("/abs/a.jsonl, b/*.jsonl", "/abs/a.jsonl,{cwd}/b/*.jsonl"),
        ("a.jsonl,,", "{cwd}/a.jsonl"),
    ],
)
def test_an_aggregates_globs_are_made_absolute_one_by_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, given: str, made: str
) -> None:
    monkeypatch.chdir(tmp_path)
    assert absolute_globs(given) == made.format(cwd=tmp_path)
