"""However a rescoring's shards and aggregate are run, they give the same merged output, metrics and coverage:
the CLI's backfill, the schedule's run requests, the new-rollouts sensor's, the aggregate asset materialized on
its own (the UI's Materialize on that one asset), and the automation sensor's aggregate after the shards."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import orjson
import pytest

from reverify_assets.defs.code_location import IN_PROCESS_RUN_CONFIG
from reverify_assets.defs.project import build_definitions
from reverify_assets.defs.rescoring_defs import RescoringDefs, build_rescoring
from reverify_assets.rescoring.spec import find_rescoring
from tests.support.automation import AggregateAutomation, schedule_tick
from tests.support.cli import run_reverify
from tests.support.project import Project, make_project

pytestmark = pytest.mark.slow
Results = tuple[bytes, list[dict]]


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return make_project(tmp_path, tasks=20)  # two shards of 10 tasks


@pytest.fixture
def instance(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dg.DagsterInstance]:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    with dg.DagsterInstance.get() as instance:
        yield instance


def rescoring_of(project: Project) -> RescoringDefs:
    return build_rescoring(find_rescoring(project.root, project.name))


def results(project: Project) -> Results:
    """The merged output and its metrics, then removed: the next path starts from none."""
    layout = rescoring_of(project).layout
    merged, metrics = layout.merged.read_bytes(), orjson.loads(layout.merged_metrics.read_bytes())
    shutil.rmtree(project.results())
    return merged, metrics


def cli_backfill(project: Project, home: Path) -> Results:
    ran = run_reverify("backfill", project.name, home=home, cwd=project.root)
    assert ran.returncode == 0, ran.stderr
    return results(project)


def execute(project: Project, instance: dg.DagsterInstance, requests: list[dg.RunRequest], job: str | None) -> None:
    """Each request run as the daemon would launch it: the code location's job, with its partition and tags."""
    definitions = build_definitions(project.root)
    for request in requests:
        result = definitions.resolve_job_def(request.job_name or job).execute_in_process(
            run_config=IN_PROCESS_RUN_CONFIG,
            instance=instance,
            partition_key=request.partition_key,
            tags=request.tags,
            raise_on_error=False,
        )
        assert result.success, f"{request.job_name or job} {request.partition_key} failed"


def test_the_schedule_and_one_asset_materialized_alone_give_the_clis_files(
    project: Project, instance: dg.DagsterInstance, tmp_path: Path
) -> None:
    expected = cli_backfill(project, tmp_path / "cli-home")
    project.write_rescoring(extra='schedule: {cron: "0 3 * * *"}\n')
    rescoring = rescoring_of(project)
    instance.add_dynamic_partitions(rescoring.shards.name, ["main.s00000", "main.s00001"])
    night = datetime(2026, 11, 30, 3, tzinfo=UTC)
    # The daemon's tick, then the shards' runs it asks for, then the aggregate the automation condition asks for.
    aggregate_at = AggregateAutomation(project.root, instance, rescoring)
    assert aggregate_at(night - timedelta(minutes=1)) == set()
    shard_requests = list(schedule_tick(project.root, instance, project.name, night).run_requests or [])
    assert len(shard_requests) == 2
    execute(project, instance, shard_requests, rescoring.shard_job.name)
    assert aggregate_at(night + timedelta(seconds=30)) == {rescoring.aggregate_partition}
    aggregate = dg.RunRequest(job_name=rescoring.aggregate_job.name, partition_key=rescoring.aggregate_partition)
    execute(project, instance, [aggregate], None)
    assert results(project) == expected, "the schedule's runs"

    # The aggregate alone, once its shards' files are in place: what the UI's Materialize on that one asset runs.
    execute(project, instance, shard_requests, rescoring.shard_job.name)
    assert not rescoring.layout.merged.exists()
    alone = dg.materialize(
        rescoring.assets,
        instance=instance,
        selection=[rescoring.aggregate_key],
        partition_key=rescoring.aggregate_partition,
    )
    assert alone.success
    assert results(project) == expected, "the aggregate materialized on its own"


def test_the_new_rollouts_sensor_and_the_automation_give_the_clis_files(
    project: Project, instance: dg.DagsterInstance, tmp_path: Path
) -> None:
    incoming = project.root / "incoming" / "main"
    incoming.mkdir(parents=True)
    shutil.copy(project.rollouts, incoming / "rollouts.jsonl")
    shutil.copy(project.inputs, incoming / "rollouts_materialized_inputs.jsonl")
    project.rescoring_file.write_text(
        'verifier: {config: [configs/mcqa.yaml], overrides: ["++mcqa.resources_servers.mcqa.grading_mode='
        'lenient_boxed"]}\nwatch: {folder: incoming, settle_s: 0}\nshard_tasks: 10\n'
        f"output_dir: results/{project.name}\n"
    )
    expected = cli_backfill(project, tmp_path / "cli-home")
    definitions = build_definitions(project.root)
    sensor = definitions.get_sensor_def(f"{project.name}_new_rollouts")
    found = sensor(dg.build_sensor_context(instance=instance, repository_def=definitions.get_repository_def()))
    for request in found.dynamic_partitions_requests:
        instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
    assert len(found.run_requests) == 2
    # The aggregates' automation sensor, ticking as the daemon does: before the shards' runs, then after them.
    before = dg.evaluate_automation_conditions(defs=definitions, instance=instance)
    execute(project, instance, found.run_requests, None)
    evaluated = dg.evaluate_automation_conditions(defs=definitions, instance=instance, cursor=before.cursor)
    rescoring = rescoring_of(project)
    assert evaluated.get_requested_partitions(rescoring.aggregate_key) == {rescoring.aggregate_partition}
    aggregate = dg.RunRequest(job_name=rescoring.aggregate_job.name, partition_key=rescoring.aggregate_partition)
    execute(project, instance, [aggregate], None)
    assert results(project) == expected
