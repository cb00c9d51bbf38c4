"""The scale-out path's own logic: which executor the deployment asks for, the flags of ``backfill --submit``,
and how a submitted backfill's progress reads. The cluster itself: tests/e2e/test_celery_cluster.py."""

# No `from __future__ import annotations`: Dagster reads the asset's context annotation itself.

from pathlib import Path

import dagster as dg
import pytest

from reverify_assets.cli.main import main
from reverify_assets.defs.celery_workers import config_differences
from reverify_assets.defs.dagster_internals import BulkActionStatus
from reverify_assets.defs.deployment import CELERY_EXECUTOR_NAME, EXECUTOR_CONFIG_ENV, deployment_executor
from reverify_assets.defs.rescoring_defs import SHARD_TAG
from reverify_assets.defs.submitted_backfills import BACKFILL_TAG, BackfillProgress, failure_reasons
from reverify_assets.errors import ConfigError, ReverifyError
from tests.support.cli import ROOT
from tests.support.project import make_project

CELERY_CONFIG = ROOT / "deploy" / "celery" / "celery.yaml"


def test_without_the_variable_runs_keep_dagsters_default_executor(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(EXECUTOR_CONFIG_ENV, raising=False)
    assert deployment_executor() is None


def test_the_deploy_files_celery_config_gives_the_celery_executor(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(EXECUTOR_CONFIG_ENV, str(CELERY_CONFIG))
    executor = deployment_executor()
    assert isinstance(executor, dg.ExecutorDefinition) and executor.name == CELERY_EXECUTOR_NAME


BROKER = "execution.config.broker"


@pytest.mark.parametrize(
    ("text", "key"),
    [
        (None, None),
        ("execution: [", None),
        ("broker: redis://r:6379/0\n", BROKER),
        ("execution:\n  config:\n    backend: redis://r:6379/1\n", BROKER),
        ("[]", BROKER),
    ],
    ids=["missing", "not YAML", "not under execution", "no broker", "a list"],
)
def test_a_bad_celery_config_is_one_line_naming_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str | None, key: str | None
) -> None:
    path = tmp_path / "celery.yaml"
    if text is not None:
        path.write_text(text)
    monkeypatch.setenv(EXECUTOR_CONFIG_ENV, str(path))
    with pytest.raises(ConfigError) as caught:
        deployment_executor()
    assert (caught.value.key, caught.value.source) == (key, str(path))


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--submit", "--parallel", "2"], "--parallel is for shards run here"),
        (["--follow", "abcdefgh", "--parallel", "2"], "--parallel is for shards run here"),
        (["--submit", "--follow", "abcdefgh"], "give one of them"),
        (["--submit", "--worker-wait", "-1"], "--worker-wait must not be negative, got -1"),
    ],
)
def test_flags_that_do_not_go_together_are_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    project = make_project(tmp_path, tasks=2, rollouts_per_task=1)
    assert main(["backfill", project.name, "--project", str(project.root), *flags]) == 2
    assert message in capsys.readouterr().err


def progress(status: BulkActionStatus, **fields: object) -> BackfillProgress:
    defaults: dict[str, object] = {
        "shards": 8,
        "done": [],
        "failed": [],
        "running": [],
        "aggregate": None,
        "rows": 0,
        "seconds": 10.0,
    }
    return BackfillProgress(status=status, **{**defaults, **fields})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("state", "line"),
    [
        (
            progress(BulkActionStatus.REQUESTED),
            "[requested] 0/8 shards done, 0 failed, 0 running, 8 waiting, 0 rows, 0 rows/s",
        ),
        (
            progress(BulkActionStatus.REQUESTED, done=["a", "b"], failed=["c"], running=["d"], rows=2500),
            "[requested] 2/8 shards done, 1 failed, 1 running, 4 waiting, 2,500 rows, 250 rows/s",
        ),
        (
            progress(
                BulkActionStatus.COMPLETED_SUCCESS,
                done=list("abcdefgh"),
                rows=320,
                aggregate=dg.DagsterRunStatus.SUCCESS,
            ),
            "[completed_success] 8/8 shards done, 0 failed, 0 running, 0 waiting, 320 rows, 32 rows/s, "
            "aggregate success",
        ),
    ],
)
def test_the_progress_line(state: BackfillProgress, line: str) -> None:
    assert state.line() == line


@pytest.mark.parametrize(
    ("status", "ended", "succeeded"),
    [
        (BulkActionStatus.REQUESTED, False, False),
        (BulkActionStatus.CANCELING, False, False),
        (BulkActionStatus.COMPLETED_SUCCESS, True, True),
        (BulkActionStatus.COMPLETED, True, True),
        (BulkActionStatus.COMPLETED_FAILED, True, False),
        (BulkActionStatus.FAILED, True, False),
        (BulkActionStatus.CANCELED, True, False),
    ],
)
def test_the_command_exits_when_the_backfill_ends_and_from_how(
    status: BulkActionStatus, ended: bool, succeeded: bool
) -> None:
    assert (progress(status).ended, progress(status).succeeded) == (ended, succeeded)


def test_following_a_backfill_the_instance_does_not_have_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    project = make_project(tmp_path, tasks=2, rollouts_per_task=1)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    assert main(["backfill", project.name, "--project", str(project.root), "--follow", "nosuchid"]) == 1
    assert "no backfill nosuchid in the Dagster instance at" in capsys.readouterr().err


OURS = {
    "broker": "redis://127.0.0.1:6379/0",
    "backend": "redis://127.0.0.1:6379/1",
    "config_source": {"task_acks_late": True, "broker_transport_options": {"visibility_timeout": 3600}},
}


@pytest.mark.parametrize(
    ("worker", "differences"),
    [
        (
            {
                "result_backend": "redis://10.0.0.1:6379/1",  # the same server, reached by another address
                "task_acks_late": True,
                "broker_transport_options": {"visibility_timeout": 3600},
            },
            [],
        ),
        (
            {"result_backend": "redis://r/1", "broker_transport_options": {"visibility_timeout": 3600}},
            ["task_acks_late None (here True)"],
        ),
        (
            {
                "result_backend": "rpc://",
                "task_acks_late": True,
                "broker_transport_options": {"visibility_timeout": 60},
            },
            [
                "broker_transport_options {'visibility_timeout': 60} (here {'visibility_timeout': 3600})",
                "result backend rpc://… (here redis://…/1)",
            ],
        ),
        (
            {
                "result_backend": "redis://127.0.0.1:6379/2",
                "task_acks_late": True,
                "broker_transport_options": {"visibility_timeout": 3600},
            },
            ["result backend redis://…/2 (here redis://…/1)"],
        ),
    ],
    ids=["same", "a setting missing", "another timeout and backend", "another database"],
)
def test_a_worker_with_another_celery_config_is_told_apart(worker: dict[str, object], differences: list[str]) -> None:
    assert config_differences(OURS, worker) == differences


@dg.asset
def verify(context: dg.AssetExecutionContext) -> None:
    if context.run.tags[SHARD_TAG] == "s1":
        raise ReverifyError("shard s1: the verifier at http://127.0.0.1:9 refused the connection\nmore")


def test_a_failed_shards_reason_is_the_first_line_of_its_latest_runs_step_failure() -> None:
    with dg.instance_for_test() as instance:
        for shard in ("s0", "s1", "s2"):
            tags = {BACKFILL_TAG: "abcdefgh", SHARD_TAG: shard}
            dg.materialize([verify], instance=instance, tags=tags, raise_on_error=False)
        dg.materialize([verify], instance=instance, tags={SHARD_TAG: "s1"}, raise_on_error=False)  # no backfill's
        reasons = failure_reasons(instance, "abcdefgh")
    assert reasons == {"s1": "shard s1: the verifier at http://127.0.0.1:9 refused the connection"}
