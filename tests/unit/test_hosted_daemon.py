"""The instance ``reverify backfill --parallel N`` hosts Dagster's loops on, and the backfills a killed one left.
The backfills themselves: tests/e2e/test_rescoring_cli.py, tests/e2e/test_signals.py, and the PostgreSQL test."""

import os
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import dagster as dg
import pytest
import yaml

from reverify_assets.defs.code_location import remote_origin
from reverify_assets.defs.dagster_internals import BulkActionStatus, InstanceRef
from reverify_assets.defs.hosted_daemon import (
    HOSTED_BY_TAG,
    ChildRunLauncher,
    _alive,
    _refuse_a_shared_queue,
    _with_local_queue,
    cancel_orphans,
    hosted_by_this_command,
)
from reverify_assets.defs.rescoring_defs import build_rescoring
from reverify_assets.defs.submitted_backfills import BACKFILL_TAG, submit_backfill
from reverify_assets.errors import StateError
from reverify_assets.rescoring.spec import find_rescoring
from tests.support.project import make_project

TAG_LIMITS = [{"key": "k", "limit": 1}]
RUNS_LIMITS = {"concurrency": {"runs": {"max_concurrent_runs": 8, "tag_concurrency_limits": TAG_LIMITS}}}


def local_ref(home: Path, settings: dict[str, object]) -> InstanceRef:
    home.mkdir()
    (home / "dagster.yaml").write_text(yaml.safe_dump(settings))
    return InstanceRef.from_dir(str(home))


@pytest.mark.parametrize(
    ("settings", "coordinator_config", "runs_settings"),
    [
        ({}, {"max_concurrent_runs": 3}, None),
        # Dagster 1.13 takes the instance's `concurrency: runs:` over the coordinator's own limit: that one is set.
        (RUNS_LIMITS, {}, {"max_concurrent_runs": 3, "tag_concurrency_limits": TAG_LIMITS}),
        (
            {"run_queue": {"max_concurrent_runs": 8, "tag_concurrency_limits": TAG_LIMITS}},
            {"max_concurrent_runs": 3, "tag_concurrency_limits": TAG_LIMITS},
            None,
        ),
    ],
    ids=["no limits of its own", "concurrency: runs:", "run_queue:"],
)
def test_the_hosted_instance_queues_at_most_n_runs_and_launches_them_here(
    tmp_path: Path, settings: dict[str, object], coordinator_config: dict[str, object], runs_settings: object
) -> None:
    ref = _with_local_queue(local_ref(tmp_path / "home", settings), 3, tmp_path)
    assert ref.run_coordinator_data.class_name == "QueuedRunCoordinator"
    assert yaml.safe_load(ref.run_coordinator_data.config_yaml) == coordinator_config
    assert ref.run_launcher_data.class_name == ChildRunLauncher.__name__
    assert (ref.settings.get("concurrency") or {}).get("runs") == runs_settings
    with dg.DagsterInstance.from_ref(ref) as instance:
        assert isinstance(instance.run_launcher, ChildRunLauncher)
        assert instance.get_concurrency_config().run_queue_config.max_concurrent_runs == 3


def ended_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(done.stdout)


@pytest.mark.parametrize(
    ("owner", "alive"),
    [
        (lambda: hosted_by_this_command()[HOSTED_BY_TAG], True),
        (lambda: f"{socket.gethostname()}:{ended_pid()}:1", False),
        # The pid of a process running now, but another start: the pid was reused.
        (lambda: f"{socket.gethostname()}:{os.getpid()}:1", False),
        (lambda: "another-machine:1:1", True),  # nothing here can tell: left alone
    ],
    ids=["this command", "ended", "pid reused", "another machine"],
)
def test_whether_a_backfills_command_still_runs(owner: object, alive: bool) -> None:
    assert _alive(owner()) is alive  # type: ignore[operator]


def test_a_killed_commands_backfill_and_its_unfinished_runs_are_canceled(tmp_path: Path) -> None:
    project = make_project(tmp_path, tasks=20)
    rescoring = build_rescoring(find_rescoring(project.root, project.name))
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(rescoring.shards.name, ["main.s00000", "main.s00001"])
        dead = {HOSTED_BY_TAG: f"{socket.gethostname()}:{ended_pid()}:1"}
        orphan = submit_backfill(instance, rescoring, ["main.s00000", "main.s00001"], dead)
        live = submit_backfill(instance, rescoring, ["main.s00000"], hosted_by_this_command())
        submitted = submit_backfill(instance, rescoring, ["main.s00001"], {})  # --submit's: the daemon's to run
        runs = {}
        for status in (dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.SUCCESS):
            run_id = str(uuid.uuid4())
            origin = remote_origin("j", project.root)
            tags = {BACKFILL_TAG: orphan}
            instance.add_run(dg.DagsterRun("j", run_id, status=status, tags=tags, remote_job_origin=origin))
            runs[status] = run_id

        assert cancel_orphans(instance) == [orphan]

        statuses = {backfill_id: instance.get_backfill(backfill_id).status for backfill_id in (orphan, live, submitted)}
        assert statuses == {
            orphan: BulkActionStatus.CANCELED,
            live: BulkActionStatus.REQUESTED,
            submitted: BulkActionStatus.REQUESTED,
        }
        after = {status: instance.get_run_by_id(run_id).status for status, run_id in runs.items()}
        assert after == {
            dg.DagsterRunStatus.QUEUED: dg.DagsterRunStatus.CANCELED,
            dg.DagsterRunStatus.STARTED: dg.DagsterRunStatus.CANCELED,
            dg.DagsterRunStatus.SUCCESS: dg.DagsterRunStatus.SUCCESS,
        }


def test_a_queue_another_command_or_a_daemon_needs_is_refused(tmp_path: Path) -> None:
    project = make_project(tmp_path, tasks=20)
    rescoring = build_rescoring(find_rescoring(project.root, project.name))
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(rescoring.shards.name, ["main.s00000"])
        _refuse_a_shared_queue(instance)  # nothing else there: accepted

        running = submit_backfill(instance, rescoring, ["main.s00000"], hosted_by_this_command())
        with pytest.raises(StateError) as caught:
            _refuse_a_shared_queue(instance)
        # A StateError has no field for the other writer: the message names it.
        assert f"another `reverify backfill --parallel` (pid {os.getpid()} on " in str(caught.value)
        instance.update_backfill(instance.get_backfill(running).with_status(BulkActionStatus.COMPLETED_SUCCESS))

        origin = remote_origin("j", project.root)
        queued = dg.DagsterRun("j", str(uuid.uuid4()), status=dg.DagsterRunStatus.QUEUED, remote_job_origin=origin)
        instance.add_run(queued)
        with pytest.raises(StateError) as caught:
            _refuse_a_shared_queue(instance)
        assert f"(one: run {queued.run_id} of j)" in str(caught.value)
