"""Where assets hand each other their handles: one folder per run, so that runs never read each other's.

Dagster's default IO manager keeps one file per asset key, shared by every run of the instance: two runs at
once (two outputs re-scored side by side, a CLI run beside a UI run) overwrote each other's handles, and a
step of one read the inputs of the other. Here a step reads what its own run stored (or, in a re-execution,
the run it re-executes, as Dagster resolves it); an asset this run did not materialize is read from the run
that materialized it last.
"""

from __future__ import annotations

import hashlib
import pickle
from pathlib import Path
from typing import Any
from urllib.parse import quote

import dagster as dg

from reverify_assets.defs.failures import Refusal, refusals_as_failures
from reverify_assets.errors import StateError, WriteError
from reverify_assets.files.atomic import write_bytes_atomic

IO_FOLDER = "io"
# File systems refuse names over 255 bytes; a quoted output path (a partition key) can be longer.
LONGEST_STORED_NAME = 200


class RunScopedIOManager(dg.ConfigurableIOManager):
    def handle_output(self, context: dg.OutputContext, obj: Any) -> None:
        path = _stored(context.step_context.instance, context.run_id, context.get_asset_identifier())
        with refusals_as_failures():  # a full disk, say: our sentence in the UI, as from a step
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise WriteError(path.parent, exc) from exc
            write_bytes_atomic(path, pickle.dumps(obj))

    def load_input(self, context: dg.InputContext) -> Any:
        identifier = context.get_asset_identifier()
        candidates = [_stored(context.instance, run_id, identifier) for run_id in _runs_to_read(context)]
        for path in candidates:
            if path.exists():
                return pickle.loads(path.read_bytes())
        raise Refusal(
            StateError(
                f"asset {context.asset_key.to_user_string()} has no stored value"
                f"{f' for partition {context.asset_partition_key}' if context.has_asset_partitions else ''}: "
                "materialize it (and what it depends on) first"
            )
        )


def _runs_to_read(context: dg.InputContext) -> list[str]:
    upstream = context.upstream_output
    runs = [upstream.run_id] if upstream is not None else []
    if (latest := _latest_materializing_run(context)) is not None and latest not in runs:
        runs.append(latest)
    return runs


def _latest_materializing_run(context: dg.InputContext) -> str | None:
    partition = context.asset_partition_key if context.has_asset_partitions else None
    records = context.instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=context.asset_key, asset_partitions=None if partition is None else [partition]),
        limit=1,
    ).records
    return records[0].run_id if records else None


def _stored(instance: dg.DagsterInstance, run_id: str, identifier: list[str] | tuple[str, ...]) -> Path:
    """One file name per part: a partition key may be a path (an output's), which must not reach out of the folder."""
    return Path(instance.storage_directory()) / run_id / IO_FOLDER / Path(*(_stored_name(part) for part in identifier))


def _stored_name(part: str) -> str:
    quoted = quote(part, safe="")
    if len(quoted) <= LONGEST_STORED_NAME:
        return quoted
    # Keep the readable end (an output's file name) and make the name unique with the whole part's digest.
    digest = hashlib.sha256(part.encode()).hexdigest()
    return f"{quoted[-(LONGEST_STORED_NAME - len(digest) - 1) :]}-{digest}"
