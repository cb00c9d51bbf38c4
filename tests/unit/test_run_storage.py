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
