"""A deployment that cannot take a backfill is one line naming the service and its address, before anything is
submitted, and never a hang or a traceback: an unreachable broker, a Redis with no worker on the steps' queue,
an environment that lacks the broker's variable, a PostgreSQL nobody listens on."""

from __future__ import annotations

import os
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest
import yaml

from tests.support.ci import service_missing
from tests.support.cli import ROOT, run_reverify
from tests.support.cluster import VENV_BIN, RedisServer, celery_worker, redis_server, stop
from tests.support.postgres import free_port
from tests.support.project import Project, make_project

pytestmark = pytest.mark.slow

CELERY_CONFIG = ROOT / "deploy" / "celery" / "celery.yaml"


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return make_project(tmp_path, tasks=4, rollouts_per_task=2)


@pytest.fixture
def redis() -> Iterator[RedisServer]:
    if shutil.which("redis-server") is None:
        service_missing("redis-server is not installed (Debian's redis-server)")
    with redis_server() as server:
        yield server


def submit(
    project: Project, home: Path, monkeypatch: pytest.MonkeyPatch, *, worker_wait_s: int = 3, **env: str
) -> tuple[int, str]:
    monkeypatch.setenv("REVERIFY_EXECUTOR_CONFIG", str(CELERY_CONFIG))
    for name in ("REVERIFY_CELERY_BROKER", "REVERIFY_CELERY_BACKEND"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    result = run_reverify(
        "backfill", project.name, "--project", project.root, "--submit", "--worker-wait", str(worker_wait_s), home=home
    )
    return result.returncode, result.stderr


def backfills_in(home: Path) -> list[str]:
    if not (home / "dagster.yaml").exists():
        return []
    with dg.DagsterInstance.from_config(str(home)) as instance:
        return [backfill.backfill_id for backfill in instance.get_backfills()]


def test_an_unreachable_broker_is_named_and_nothing_is_submitted(
    tmp_path: Path, project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    closed = free_port()
    code, err = submit(
        project,
        tmp_path / "home",
        monkeypatch,
        REVERIFY_CELERY_BROKER=f"redis://127.0.0.1:{closed}/0",
        REVERIFY_CELERY_BACKEND=f"redis://127.0.0.1:{closed}/1",
    )
    assert code == 1
    assert err.strip().splitlines() == [
        f"reverify: error: cannot reach the Celery broker at redis://127.0.0.1:{closed}/0 (from {CELERY_CONFIG}): "
        f"Error 111 connecting to 127.0.0.1:{closed}. Connection refused."
    ]
    assert not backfills_in(tmp_path / "home")


def test_no_worker_on_the_queue_is_said_after_the_wait(
    tmp_path: Path, project: Project, redis: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, err = submit(
        project,
        tmp_path / "home",
        monkeypatch,
        REVERIFY_CELERY_BROKER=redis.url(db=0),
        REVERIFY_CELERY_BACKEND=redis.url(db=1),
    )
    assert code == 1
    assert len(err.strip().splitlines()) == 1, err
    assert f"no Celery worker is listening on queue 'dagster' at {redis.url(db=0)}: waited 3 s" in err
    assert f"dagster-celery worker start -A dagster_celery.app -y {CELERY_CONFIG}" in err
    assert not backfills_in(tmp_path / "home")


def test_a_worker_started_with_another_celery_config_is_named(
    tmp_path: Path, project: Project, redis: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its lost steps would be lost for good: task_acks_late off."""
    config = yaml.safe_load(CELERY_CONFIG.read_text())
    config["execution"]["config"]["config_source"]["task_acks_late"] = False
    other = tmp_path / "other-celery.yaml"
    other.write_text(yaml.safe_dump(config))
    home = tmp_path / "home"
    urls = {"REVERIFY_CELERY_BROKER": redis.url(db=0), "REVERIFY_CELERY_BACKEND": redis.url(db=1)}
    env = {**urls, "DAGSTER_HOME": str(home), "PATH": f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}"}
    home.mkdir()
    worker = celery_worker("stale", other, env, cwd=project.root, log=tmp_path / "worker.log")
    try:
        code, err = submit(project, home, monkeypatch, worker_wait_s=60, **urls)  # the worker is starting
    finally:
        stop(worker)
    assert code == 1
    assert len(err.strip().splitlines()) == 1, err
    assert f"Celery worker stale@{socket.gethostname()} runs with another config than {CELERY_CONFIG}" in err
    assert "task_acks_late False (here True)" in err
    assert not backfills_in(home)


def test_a_broker_variable_not_set_here_is_named(
    tmp_path: Path, project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, err = submit(project, tmp_path / "home", monkeypatch)
    assert code == 1
    assert err.strip().splitlines() == [
        f"reverify: error: REVERIFY_CELERY_BROKER is not set: the Celery config {CELERY_CONFIG} (named by "
        "REVERIFY_EXECUTOR_CONFIG) takes execution.config.broker from it"
    ]


def test_storage_nobody_listens_on_is_one_line_naming_it(
    tmp_path: Path, project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(ROOT / "deploy" / "celery" / "dagster.yaml", home / "dagster.yaml")
    closed = free_port()
    for name, value in {
        "REVERIFY_PG_HOST": "127.0.0.1",
        "REVERIFY_PG_PORT": str(closed),
        "REVERIFY_PG_USER": "dagster",
        "REVERIFY_PG_PASSWORD": "unused",
        "REVERIFY_PG_DB": "dagster",
    }.items():
        monkeypatch.setenv(name, value)
    result = run_reverify("status", project.name, "--project", project.root, home=home)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"reverify: error: cannot reach the Dagster instance's storage ({home / 'dagster.yaml'}): connection to "
        f'server at "127.0.0.1", port {closed} failed: Connection refused'
    ]


def test_no_daemon_to_run_the_backfill_is_said_and_nothing_is_submitted(
    tmp_path: Path, project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("REVERIFY_EXECUTOR_CONFIG", raising=False)  # runs on the daemon's machine: no Celery
    home = tmp_path / "home"
    result = run_reverify(
        "backfill", project.name, "--project", project.root, "--submit", "--worker-wait", "2", home=home
    )
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"reverify: error: no Dagster daemon runs backfills for the instance at {home} (last heard from: never); "
        "waited 2 s. Start one where the project is: dagster-daemon run -w workspace.yaml"
    ]
    assert not backfills_in(home)
