"""The rescoring's sensor, schedule and run-failure sensor, evaluated in-process against a test instance."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import orjson
import pytest

from reverify_assets.cli.rescoring_runs import rescore_shard
from reverify_assets.defs.project import build_definitions
from reverify_assets.defs.rescoring_defs import build_rescoring
from reverify_assets.rescoring.spec import find_rescoring
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


def test_schedule_requests_missing_then_aggregate_then_stale_shards_then_nothing_after_a_revert(
    tmp_path: Path, instance
) -> None:
    project = make_project(tmp_path, tasks=20)
    project.write_rescoring(extra='schedule: {cron: "0 3 * * *"}\n')

    def tick(root: Path) -> list[dg.RunRequest]:
        schedule = build_definitions(root).get_schedule_def(f"{project.name}_rescore")
        context = dg.build_schedule_context(
            instance=instance, scheduled_execution_time=datetime(2026, 11, 30, 3, tzinfo=UTC)
        )
        return list(schedule(context))

    def shards_of(config_hash: str) -> list[str]:
        return [f"main.s00000|{config_hash}", f"main.s00001|{config_hash}"]

    rescoring = build_rescoring(find_rescoring(project.root, project.name))
    instance.add_dynamic_partitions(rescoring.shards.name, ["main.s00000", "main.s00001"])
    assert sorted(r.partition_key for r in tick(project.root)) == shards_of(rescoring.setup.config_hash)
    for shard in ("main.s00000", "main.s00001"):
        assert rescore_shard(rescoring, shard)[0]
    [aggregate] = tick(project.root)
    assert aggregate.job_name == f"{project.name}_aggregate_job"
    project.write_rescoring(override=STRICT, extra='schedule: {cron: "0 3 * * *"}\n')
    edited = build_rescoring(find_rescoring(project.root, project.name))
    assert sorted(r.partition_key for r in tick(project.root)) == shards_of(edited.setup.config_hash)
    # The edit undone: the first config's results are there, and current again.
    project.write_rescoring(extra='schedule: {cron: "0 3 * * *"}\n')
    [aggregate] = tick(project.root)
    assert aggregate.job_name == f"{project.name}_aggregate_job"


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
