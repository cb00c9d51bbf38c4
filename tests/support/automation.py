"""The rescore schedule and the aggregate's automation condition evaluated as the daemon evaluates them."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import dagster as dg

from reverify_assets.defs.project import build_definitions
from reverify_assets.defs.rescoring_defs import RescoringDefs


class AggregateAutomation:
    """The aggregate's automation condition evaluated as the reverify_aggregates sensor does, one evaluation after
    another (each with the cursor of the one before): what it requests at each time."""

    def __init__(self, root: Path, instance: dg.DagsterInstance, rescoring: RescoringDefs) -> None:
        self.root, self.instance, self.rescoring = root, instance, rescoring
        self.cursor: object = None

    def __call__(self, at: datetime) -> set[str]:
        result = dg.evaluate_automation_conditions(
            defs=build_definitions(self.root),
            instance=self.instance,
            asset_selection=dg.AssetSelection.assets(self.rescoring.aggregate_key),
            evaluation_time=at,
            cursor=self.cursor,
        )
        self.cursor = result.cursor
        return set(result.get_requested_partitions(self.rescoring.aggregate_key))


def schedule_tick(root: Path, instance: dg.DagsterInstance, name: str, at: datetime) -> dg.ScheduleExecutionData:
    """``evaluate_tick`` with the repository, as the daemon calls it: it resolves each request's partition against
    the schedule's job, which calling the schedule's function skips."""
    definitions = build_definitions(root)
    schedule = definitions.get_schedule_def(f"{name}_rescore")
    assert schedule.default_status == dg.DefaultScheduleStatus.RUNNING
    context = dg.build_schedule_context(
        instance=instance, scheduled_execution_time=at, repository_def=definitions.get_repository_def()
    )
    return schedule.evaluate_tick(context)


def requested(data: dg.ScheduleExecutionData) -> list[str]:
    assert data.skip_message is None, data.skip_message
    for request in data.run_requests or []:  # resolved against the shards' job, as the daemon launches them
        assert request.tags["dagster/partition"] == request.partition_key
    return sorted(str(request.partition_key) for request in data.run_requests or [])
