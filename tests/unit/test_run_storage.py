"""Runs sharing one Dagster instance never read each other's asset handles."""

# No `from __future__ import annotations`: Dagster reads the config annotation itself.
from pathlib import Path

import dagster as dg
import pytest

from reverify_assets.defs.run_storage import RunScopedIOManager


class Value(dg.Config):
    value: str


@dg.asset
def handle(config: Value) -> str:
    return config.value


@dg.asset(deps=[handle])
def other_run_meanwhile(context: dg.AssetExecutionContext) -> None:
    """Another run materializes ``handle`` between this run's ``handle`` and ``reader`` steps."""
    dg.materialize(
        [handle],
        instance=context.instance,
        resources={"io_manager": RunScopedIOManager()},
        run_config={"ops": {"handle": {"config": {"value": "the other run's"}}}},
    )


@dg.asset(deps=[other_run_meanwhile])
def reader(handle: str) -> str:
    return handle


def test_a_step_reads_its_own_runs_handle_while_another_run_writes_the_same_asset(tmp_path: Path) -> None:
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        result = dg.materialize(
            [handle, other_run_meanwhile, reader],
            instance=instance,
            resources={"io_manager": RunScopedIOManager()},
            run_config={"ops": {"handle": {"config": {"value": "this run's"}}}},
        )
        assert result.output_for_node("reader") == "this run's"


def test_an_asset_outside_the_run_is_read_from_the_run_that_materialized_it_last(tmp_path: Path) -> None:
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        for value in ("first", "latest"):
            dg.materialize(
                [handle],
                instance=instance,
                resources={"io_manager": RunScopedIOManager()},
                run_config={"ops": {"handle": {"config": {"value": value}}}},
            )
        result = dg.materialize(
            [handle, reader], instance=instance, selection=[reader], resources={"io_manager": RunScopedIOManager()}
        )
        assert result.output_for_node("reader") == "latest"


def test_an_asset_never_materialized_is_a_clear_failure(tmp_path: Path) -> None:
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        with pytest.raises(dg.Failure, match="asset handle has no stored value: materialize it"):
            dg.materialize(
                [handle, reader], instance=instance, selection=[reader], resources={"io_manager": RunScopedIOManager()}
            )


LONG_PATHS = dg.DynamicPartitionsDefinition(name="long_paths")


@dg.asset(partitions_def=LONG_PATHS)
def partitioned_handle(context: dg.AssetExecutionContext) -> str:
    return context.partition_key


@dg.asset(partitions_def=LONG_PATHS)
def partitioned_reader(partitioned_handle: str) -> str:
    return partitioned_handle


def test_an_output_path_longer_than_a_file_name_is_stored_and_read_back(tmp_path: Path) -> None:
    # Two keys over 255 bytes that differ only at the start must not share a stored file.
    tail = "/".join(["a-rather-long-folder-name"] * 12) + "/reverified.jsonl"
    keys = [f"/first{tail}", f"/second{tail}"]
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        instance.add_dynamic_partitions(LONG_PATHS.name, keys)
        for key in keys:
            result = dg.materialize(
                [partitioned_handle, partitioned_reader],
                instance=instance,
                partition_key=key,
                resources={"io_manager": RunScopedIOManager()},
            )
            assert result.output_for_node("partitioned_reader") == key
        for key in keys:
            alone = dg.materialize(
                [partitioned_handle, partitioned_reader],
                instance=instance,
                partition_key=key,
                selection=[partitioned_reader],
                resources={"io_manager": RunScopedIOManager()},
            )
            assert alone.output_for_node("partitioned_reader") == key
