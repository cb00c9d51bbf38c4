"""Materializing the rescoring assets in this process, against the instance in DAGSTER_HOME."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import dagster as dg

from reverify_assets.defs.assets import REVERIFY_ASSETS
from reverify_assets.defs.handles import OutputHandle
from reverify_assets.defs.instance import ensure_dagster_home
from reverify_assets.defs.resources import RescoringResource
from reverify_assets.errors import ReverifyError

# Dagster's per-event console log is for the UI; on a terminal the user sees our summary instead.
QUIET_RUN_CONFIG = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}


@dataclass(frozen=True)
class MaterializedRun:
    run_id: str
    output: OutputHandle
    failures: OutputHandle
    metrics: OutputHandle | None
    verification_metadata: dict[str, Any]


def materialize_rescoring(
    rescoring: RescoringResource, *, aggregate: bool, tags: dict[str, str] | None = None
) -> MaterializedRun:
    ensure_dagster_home()
    selection: Sequence[str] = [
        "materialized_inputs",
        "rollouts",
        "verify_payloads",
        "reverified_rows",
        "reverify_failures",
    ]
    if aggregate:
        selection = [*selection, "aggregate_metrics"]
    with dg.DagsterInstance.get() as instance:
        try:
            result = dg.materialize(
                REVERIFY_ASSETS,
                instance=instance,
                resources={"rescoring": rescoring},
                run_config=QUIET_RUN_CONFIG,
                selection=list(selection),
                tags=tags or {},
            )
        except dg.DagsterExecutionStepExecutionError as exc:
            raise _user_error(exc) from exc
    metadata = {
        event.step_materialization_data.materialization.asset_key.to_user_string(): (
            event.step_materialization_data.materialization.metadata
        )
        for event in result.get_asset_materialization_events()
    }
    return MaterializedRun(
        run_id=result.run_id,
        output=result.output_for_node("reverify", "reverified_rows"),
        failures=result.output_for_node("reverify", "reverify_failures"),
        metrics=result.output_for_node("aggregate_metrics") if aggregate else None,
        verification_metadata=metadata.get("reverified_rows", {}),
    )


def _user_error(exc: dg.DagsterExecutionStepExecutionError) -> BaseException:
    """Our own errors come out as they are; anything else keeps Dagster's context."""
    cause = exc.user_exception
    if isinstance(cause, ReverifyError | KeyboardInterrupt):
        return cause
    return ReverifyError(f"step {exc.step_key!r} failed: {type(cause).__name__}: {cause}")
