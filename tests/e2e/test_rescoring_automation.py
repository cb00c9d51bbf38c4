"""The rescoring's sensor, schedule and run-failure sensor, evaluated in-process against a test instance."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import orjson
import pytest

from reverify_assets.cli.rescoring_runs import rescore_shard
from reverify_assets.defs.project import build_definitions
from reverify_assets.defs.rescoring_defs import build_rescoring
from reverify_assets.rescoring.spec import find_rescoring
from tests.support.automation import AggregateAutomation, requested, schedule_tick
from tests.support.cli import read_jsonl
from tests.support.project import STRICT, make_project

pytestmark = pytest.mark.slow


@pytest.fixture
def instance(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    with dg.DagsterInstance.get() as instance:
        yield instance


def test_sensor_waits_for_the_inputs_beside_new_rollouts(tmp_path: Path, instance) -> None:
    project = make_project(tmp_path, tasks=20)
    incoming = project.root / "incoming" / "run-8"
    incoming.mkdir(parents=True)
    project.rescoring_file.write_text(
        "verifier: {config: [configs/mcqa.yaml]}\nwatch: {folder: incoming, settle_s: 0}\nshard_tasks: 10\n"
        "output_dir: results/x\n"
    )
    definitions = build_definitions(project.root)
    sensor = definitions.get_sensor_def(f"{project.name}_new_rollouts")

    def tick():
        context = dg.build_sensor_context(instance=instance, repository_def=definitions.get_repository_def())
        return sensor(context)

    assert tick().skip_message.startswith("no new shards")
    shutil.copy(project.rollouts, incoming / "rollouts.jsonl")
    assert tick().skip_message.startswith("no new shards"), "a pair still being written is not a source yet"
    shutil.copy(project.inputs, incoming / "rollouts_materialized_inputs.jsonl")
    project.rescoring_file.write_text(project.rescoring_file.read_text().replace("settle_s: 0", "settle_s: 3600"))
    definitions = build_definitions(project.root)
    sensor = definitions.get_sensor_def(f"{project.name}_new_rollouts")
    assert tick().skip_message.startswith("no new shards"), "a pair that changed a moment ago may still be growing"
    project.rescoring_file.write_text(project.rescoring_file.read_text().replace("settle_s: 3600", "settle_s: 0"))
    definitions = build_definitions(project.root)
    sensor = definitions.get_sensor_def(f"{project.name}_new_rollouts")
    data = tick()
    config_hash = build_rescoring(find_rescoring(project.root, project.name)).setup.config_hash
    assert [r.partition_key for r in data.run_requests] == [
        f"run-8.s00000|{config_hash}",
        f"run-8.s00001|{config_hash}",
    ]
    [request] = data.dynamic_partitions_requests
    assert list(request.partition_keys) == ["run-8.s00000", "run-8.s00001"]
    instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
    assert tick().skip_message == "no new shards (2 registered)"


NIGHT = datetime(2026, 11, 30, 3, tzinfo=UTC)
NIGHTLY = 'schedule: {cron: "0 3 * * *"}\n'


def test_the_schedule_as_the_daemon_evaluates_it_through_four_nights(tmp_path: Path, instance) -> None:
    """Every shard missing, the aggregate only (the automation condition takes it at the tick), nothing to do, some
    shards stale; and an undone edit."""
    project = make_project(tmp_path, tasks=20)
    cron = NIGHTLY
    project.write_rescoring(extra=cron)
    shards = ["main.s00000", "main.s00001"]

    def tick(at: datetime = NIGHT) -> dg.ScheduleExecutionData:
        return schedule_tick(project.root, instance, project.name, at)

    rescoring = build_rescoring(find_rescoring(project.root, project.name))
    assert tick().skip_message == (
        f"no shards registered under config {rescoring.setup.config_hash} yet: the new-rollouts sensor registers them"
    )
    instance.add_dynamic_partitions(rescoring.shards.name, shards)
    # Every shard missing: one run each.
    assert requested(tick()) == [rescoring.partition_key(shard) for shard in shards]
    for shard in shards:
        assert rescore_shard(rescoring, shard)[0]

    # The aggregate only: the schedule cannot ask for it (another job's partition) and says who does.
    only_aggregate = tick()
    assert only_aggregate.run_requests == [] and only_aggregate.skip_message == (
        f"all 2 shards current under config {rescoring.setup.config_hash}; the aggregate is behind (it has no results "
        "yet): reverify_aggregates materializes it after this tick"
    )
    aggregate_at = AggregateAutomation(project.root, instance, rescoring)
    assert aggregate_at(NIGHT - timedelta(minutes=2)) == set(), "the first evaluation only starts the cursor"
    assert aggregate_at(NIGHT - timedelta(minutes=1)) == set(), "eager alone does not try it again"
    assert aggregate_at(NIGHT + timedelta(seconds=30)) == {rescoring.aggregate_partition}, "the tick does"
    assert aggregate_at(NIGHT + timedelta(seconds=60)) == set(), "once"
    aggregate = dg.materialize(
        rescoring.assets,
        instance=instance,
        partition_key=rescoring.aggregate_partition,
        selection=[rescoring.aggregate_key],
    )
    assert aggregate.success

    # Nothing to do: a skip that says why.
    quiet = tick()
    assert quiet.run_requests == []
    assert quiet.skip_message == f"all 2 shards current under config {rescoring.setup.config_hash}"

    # A verifier edit: every shard stale, all requested; one re-scored, the other still requested.
    project.write_rescoring(override=STRICT, extra=cron)
    edited = build_rescoring(find_rescoring(project.root, project.name))
    assert requested(tick()) == [edited.partition_key(shard) for shard in shards]
    assert rescore_shard(edited, shards[0])[0]
    assert requested(tick()) == [edited.partition_key(shards[1])]

    # The edit undone: the first config's results are current again.
    project.write_rescoring(extra=cron)
    assert tick().skip_message == f"all 2 shards current under config {rescoring.setup.config_hash}"


def test_a_shard_that_keeps_failing_is_retried_each_night_and_the_aggregate_goes_on_without_it(
    tmp_path: Path, instance
) -> None:
    """Tasks 10..19 form shard 1; one of its rollouts lost its input row, so it fails every time. The tick asks for
    it again; the aggregate follows at the tick with shard 0 alone, as `reverify backfill` leaves such a shard out;
    an aggregate whose run failed is tried again at the next tick, once."""
    project = make_project(tmp_path, tasks=20)
    project.write_rescoring(extra=NIGHTLY)
    rows = [row for row in read_jsonl(project.inputs) if (row["_ng_task_index"], row["_ng_rollout_index"]) != (12, 1)]
    project.inputs.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))
    rescoring = build_rescoring(find_rescoring(project.root, project.name))
    instance.add_dynamic_partitions(rescoring.shards.name, ["main.s00000", "main.s00001"])
    assert rescore_shard(rescoring, "main.s00000")[0]
    assert not rescore_shard(rescoring, "main.s00001")[0]

    assert requested(schedule_tick(project.root, instance, project.name, NIGHT)) == [
        rescoring.partition_key("main.s00001")
    ]
    aggregate_at = AggregateAutomation(project.root, instance, rescoring)
    assert aggregate_at(NIGHT - timedelta(minutes=2)) == set()
    assert aggregate_at(NIGHT + timedelta(seconds=30)) == {rescoring.aggregate_partition}

    # The aggregate's run fails (its shards' files gone): the next tick tries it again.
    shutil.rmtree(project.results())
    failed = dg.materialize(
        rescoring.assets,
        instance=instance,
        partition_key=rescoring.aggregate_partition,
        selection=[rescoring.aggregate_key],
        raise_on_error=False,
    )
    assert not failed.success
    assert aggregate_at(NIGHT + timedelta(hours=1)) == set(), "not before the next tick"
    assert aggregate_at(NIGHT + timedelta(days=1, seconds=30)) == {rescoring.aggregate_partition}
    assert aggregate_at(NIGHT + timedelta(days=1, seconds=60)) == set()


def test_run_failure_sensor_reports_the_shard_and_the_error(tmp_path: Path, instance) -> None:
    project = make_project(tmp_path, tasks=20)
    rescoring = build_rescoring(find_rescoring(project.root, project.name))
    instance.add_dynamic_partitions(rescoring.shards.name, ["main.s00000"])
    project.rollouts.unlink()  # the shard cannot be read: its run fails
    result = dg.materialize(
        rescoring.assets,
        instance=instance,
        partition_key=rescoring.partition_key("main.s00000"),
        selection=rescoring.shard_asset_keys,
        raise_on_error=False,
        tags={"reverify/rescoring": project.name},
    )
    assert not result.success
    sensor = build_definitions(project.root).get_sensor_def("reverify_shard_failures")
    context = dg.build_run_status_sensor_context(
        sensor_name="reverify_shard_failures",
        dagster_event=result.get_run_failure_event(),
        dagster_instance=instance,
        dagster_run=result.dagster_run,
    ).for_run_failure()
    sensor(context)
    [report] = [
        orjson.loads(line) for line in (project.results() / "shard_run_failures.jsonl").read_bytes().splitlines()
    ]
    assert report["shard"] == "main.s00000" and report["rescoring"] == project.name
    assert "rollouts.jsonl" in report["error"]
