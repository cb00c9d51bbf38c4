"""Reading what a CLI run recorded in a Dagster instance directory, as the UI would show it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg

from reverify_assets.defs.dagster_internals import InstanceRef


def open_instance(home: Path) -> dg.DagsterInstance:
    return dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(home)))


def latest_materialization(instance: dg.DagsterInstance, asset: str) -> tuple[dict[str, Any], dict[str, str]]:
    """(metadata values, tags) of the asset's latest materialization."""
    event = instance.get_latest_materialization_event(dg.AssetKey(asset))
    assert event is not None and event.asset_materialization is not None, f"{asset} was never materialized"
    materialization = event.asset_materialization
    metadata = {name: getattr(value, "value", value) for name, value in materialization.metadata.items()}
    return metadata, dict(materialization.tags or {})


def latest_check(instance: dg.DagsterInstance, asset: str, check: str) -> Any:
    key = dg.AssetCheckKey(dg.AssetKey.from_user_string(asset), check)
    record = instance.event_log_storage.get_latest_asset_check_execution_by_key([key])[key]
    return record.event.dagster_event.event_specific_data


def checked_partitions(instance: dg.DagsterInstance, asset: str, check: str) -> list[str | None]:
    """The partition each evaluation of the check recorded, latest first."""
    key = dg.AssetCheckKey(dg.AssetKey.from_user_string(asset), check)
    records = instance.event_log_storage.get_asset_check_execution_history(key, limit=100)
    return [record.event.dagster_event.event_specific_data.partition for record in records if record.event]
