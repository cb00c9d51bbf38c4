"""A cluster in miniature: ``reverify backfill --submit`` hands a rescoring of 8 shards to the Dagster daemon
(and, interrupted, leaves it there for ``--follow``), whose runs put their steps on two Celery workers, each a
host of its own (a network namespace reaching Redis and PostgreSQL over a veth pair). One host is lost (every
process in it killed) while it runs a shard: the backfill still ends with every shard materialized once, and
the merged output is what one unsharded ``reverify run`` gives.

Everything is configured as ``docs/scale-out.md`` tells an operator: ``deploy/celery/dagster.yaml`` unchanged
as the instance, ``deploy/celery/celery.yaml`` for the workers and the code location, with one change: the
time after which a lost worker's task goes back on the queue, an hour there, 45 s here (the test's steps take
seconds).
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import dagster as dg
import pytest
import yaml

from tests.support.ci import in_ci, service_missing
from tests.support.cli import CLI_LIMIT_S, MCQA_CONFIG, ROOT, read_jsonl, run_reverify
from tests.support.cluster import (
    VENV_BIN,
    ClusterUnavailable,
    Namespace,
    celery_worker,
    dagster_daemon,
    deployment_env,
    network_namespaces,
    redis_server,
    stop,
    stop_namespace_processes,
)
from tests.support.postgres import PostgresUnavailable, check_available, throwaway_postgres
from tests.support.process_tree import wait_until
from tests.support.project import LENIENT, make_project

pytestmark = pytest.mark.slow

NAME = "cluster"
TASKS, ROLLOUTS_PER_TASK, SHARD_TASKS = 80, 4, 10
SHARDS = TASKS // SHARD_TASKS
LOST_TASK_BACK_AFTER_S = 45
WORKER_NAME = "Celery worker"  # the metadata dagster-celery's worker puts on the step's engine event
SUCCEEDED = re.compile(r"Task execute_plan\[([0-9a-f-]+)\] succeeded")
SHARD_TAG = "dagster/partition/shard"


@pytest.fixture
def services() -> None:
    try:
        check_available()
    except PostgresUnavailable as exc:
        service_missing(f"PostgreSQL is unavailable: {exc}")
    if shutil.which("redis-server") is None:
        service_missing("redis-server is not installed (Debian's redis-server)")


@pytest.fixture
def hosts() -> Iterator[list[Namespace] | None]:
    """Two network namespaces, or None where they cannot be made (not root): the workers are then two plain
    processes on this host, which still shows the steps spread over two workers, but not over two hosts."""
    try:
        with network_namespaces(2) as made:
            yield made
    except ClusterUnavailable as exc:
        if in_ci():  # root there (.ci/run): namespaces are expected
            pytest.fail(f"CI=true but network namespaces cannot be made: {exc}")
        yield None


def celery_config(path: Path) -> Path:
    config = yaml.safe_load((ROOT / "deploy" / "celery" / "celery.yaml").read_text())
    options = config["execution"]["config"]["config_source"]["broker_transport_options"]
    options["visibility_timeout"] = LOST_TASK_BACK_AFTER_S
    path.write_text(yaml.safe_dump(config))
    return path


def start_reverify(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "w") as out:
        return subprocess.Popen(
            [str(VENV_BIN / "reverify"), *args], stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def read(log: Path) -> str:
    return log.read_text(errors="replace") if log.exists() else ""


def tasks_in(log: Path, pattern: re.Pattern[str]) -> set[str]:
    return set(pattern.findall(log.read_text(errors="replace"))) if log.exists() else set()


def scored_by_key(path: Path) -> dict[tuple[int, int], tuple[float, object]]:
    rows = read_jsonl(path)
    keys = [(row["_ng_task_index"], row["_ng_rollout_index"]) for row in rows]
    assert len(keys) == len(set(keys)), f"{path} holds a key twice"
    return {key: (row["reward"], row.get("extracted_answer")) for key, row in zip(keys, rows, strict=True)}


def steps_taken_by(instance: dg.DagsterInstance, worker: str) -> list[str]:
    """The runs of the rescoring whose shard step ``worker`` took (as the step's engine events say)."""
    runs = instance.get_runs(filters=dg.RunsFilter(tags={"reverify/rescoring": NAME}))
    return [
        run.run_id for run in runs if any(name.startswith(f"{worker}@") for name in step_workers(instance, run.run_id))
    ]


def shard_materializations(instance: dg.DagsterInstance) -> dict[str, int]:
    """How many times each shard's reverified rows were materialized."""
    records = instance.fetch_materializations(dg.AssetKey([NAME, "reverified_shard"]), limit=1000).records
    counts: dict[str, int] = {}
    for record in records:
        partition = record.partition_key
        assert partition is not None
        shard = partition.split("|")[0]  # "<shard>|<config>": Dagster joins the dimensions in their names' order
        counts[shard] = counts.get(shard, 0) + 1
    return counts


def step_workers(instance: dg.DagsterInstance, run_id: str) -> list[str]:
    """The Celery workers that took the run's shard step, in order (a lost one's, then the one that finished)."""
    workers = []
    for record in instance.all_logs(run_id, of_type=dg.DagsterEventType.ENGINE_EVENT):
        event = record.dagster_event
        if event is not None and event.step_key and event.step_key.endswith("rescore_shard"):
            metadata = event.engine_event_data.metadata
            if WORKER_NAME in metadata:
                workers.append(str(getattr(metadata[WORKER_NAME], "value", metadata[WORKER_NAME])))
    return workers


def test_a_submitted_backfill_runs_on_two_celery_hosts_and_loses_nothing_when_one_is_lost(
    tmp_path: Path, services: None, hosts: list[Namespace] | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = make_project(tmp_path, tasks=TASKS, rollouts_per_task=ROLLOUTS_PER_TASK, name=NAME)
    project.write_rescoring(shard_tasks=SHARD_TASKS)
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(ROOT / "deploy" / "celery" / "dagster.yaml", home / "dagster.yaml")
    config = celery_config(tmp_path / "celery.yaml")
    logs = tmp_path / "logs"
    logs.mkdir()

    # The answer: one unsharded run of the same rows, on a SQLite home of its own.
    single = tmp_path / "single.jsonl"
    result = run_reverify(
        "run", "--config", MCQA_CONFIG, "--inputs", project.inputs, "--rollouts", project.rollouts,
        "--output", single, LENIENT, home=tmp_path / "sqlite_home",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    expected = scored_by_key(single)
    assert len(expected) == TASKS * ROLLOUTS_PER_TASK

    host_addresses = [] if hosts is None else [host.host_address for host in hosts]
    with ExitStack() as cluster:
        postgres = cluster.enter_context(throwaway_postgres(also_on=host_addresses))
        redis = cluster.enter_context(redis_server(["127.0.0.1", *host_addresses]))
        here = deployment_env(home, config, postgres, redis)
        for key, value in here.items():
            monkeypatch.setenv(key, value)  # this test's own instance, and every command it runs
        workers: list[subprocess.Popen[bytes]] = []
        for number in (1, 2):
            host = None if hosts is None else hosts[number - 1]
            reach = "127.0.0.1" if host is None else host.host_address
            env = deployment_env(home, config, postgres, redis, reach)
            log = logs / f"worker{number}.log"
            workers.append(celery_worker(f"worker{number}", config, env, cwd=project.root, log=log, namespace=host))
            cluster.callback(stop, workers[-1])
        # Registered before the daemon starts: its new-rollouts sensor would otherwise register them itself and
        # launch a run for each, beside the backfill's (docs/scale-out.md).
        registered = run_reverify("shards", NAME, "--project", project.root, home=home)
        assert registered.returncode == 0, registered.stderr
        daemon = dagster_daemon(project.root / "workspace.yaml", here, log=logs / "daemon.log")
        cluster.callback(stop, daemon)

        # Submitted, followed a moment, then Ctrl-C: the following stops, the backfill goes on.
        # --worker-wait: the daemon and the workers were started moments ago, on a machine that may be busy.
        submit = ["backfill", NAME, "--project", str(project.root), "--submit", "--worker-wait", "300"]
        submitted = start_reverify(submit, logs / "submit.log")
        cluster.callback(stop, submitted)  # on a failed assertion below; a no-op once it has ended
        following = re.compile(r"backfill ([a-z]+) submitted.*\n.*\n  \[", re.S)
        assert wait_until(lambda: following.search(read(logs / "submit.log")), timeout=CLI_LIMIT_S), _logs(logs)
        backfill_id = following.search(read(logs / "submit.log")).group(1)  # type: ignore[union-attr]
        submitted.send_signal(signal.SIGINT)
        assert submitted.wait(timeout=CLI_LIMIT_S) == 130, _logs(logs)
        assert (
            f"stopped following backfill {backfill_id}; it goes on. Follow it again with "
            f"`reverify backfill {NAME} --project {project.root} --follow {backfill_id}`"
        ) in read(logs / "submit.log")
        backfill = start_reverify(
            ["backfill", NAME, "--project", str(project.root), "--follow", backfill_id], logs / "follow.log"
        )
        cluster.callback(stop, backfill)

        # Lose worker 1's host while it runs a shard step, once it has finished another.
        worker1_log = logs / "worker1.log"
        with dg.DagsterInstance.from_config(str(home)) as instance:

            def worker1_busy_after_a_success() -> bool:
                done = len(tasks_in(worker1_log, SUCCEEDED))
                return done > 0 and len(steps_taken_by(instance, "worker1")) > done

            assert wait_until(worker1_busy_after_a_success, timeout=CLI_LIMIT_S, poll_s=0.2), _logs(logs)
        if hosts is None:
            stop(workers[0], grace_s=0)
        else:
            stop_namespace_processes(hosts[0])
        lost_at = time.monotonic()

        assert backfill.wait(timeout=CLI_LIMIT_S) == 0, _logs(logs)
        print(f"the backfill ended {time.monotonic() - lost_at:.0f} s after worker 1 was lost")

        with dg.DagsterInstance.from_config(str(home)) as instance:
            runs = instance.get_runs(filters=dg.RunsFilter(tags={"reverify/rescoring": NAME}))
            history = [
                (run.tags[SHARD_TAG], run.status, step_workers(instance, run.run_id))
                for run in reversed(runs)
                if SHARD_TAG in run.tags
            ]
            materializations = shard_materializations(instance)
    print("\n".join(f"{shard} {status.value}: {' '.join(workers)}" for shard, status, workers in history))
    finished = {shard: workers for shard, status, workers in history if status == dg.DagsterRunStatus.SUCCESS}
    assert sorted(finished) == [f"main.s{number:05d}" for number in range(SHARDS)], history
    assert all(finished.values()), f"a shard's step ran on no Celery worker: {history}"
    assert {workers[-1].split("@")[0] for workers in finished.values()} == {"worker1", "worker2"}, history
    took: dict[str, list[str]] = {}  # every worker that took a shard's step, in any of its runs
    for shard, _, workers in history:
        took.setdefault(shard, []).extend(workers)
    lost = [
        shard
        for shard, workers in finished.items()
        if workers[-1].startswith("worker2@") and any(worker.startswith("worker1@") for worker in took[shard])
    ]
    assert lost, f"no shard worker 1 was running when lost was finished by worker 2: {history}"
    # Taken up again by Celery within its run, not by a run retry, and no step given to two workers while it ran.
    assert all(status == dg.DagsterRunStatus.SUCCESS for _, status, _ in history), history
    assert [shard for shard, workers in took.items() if len(workers) > 1] == lost, history
    assert materializations == dict.fromkeys(finished, 1), materializations

    merged = next(project.results().glob("*/merged.jsonl"))
    assert scored_by_key(merged) == expected


def _logs(folder: Path) -> str:
    return "\n".join(f"--- {log.name}:\n{log.read_text(errors='replace')[-3000:]}" for log in sorted(folder.glob("*")))
