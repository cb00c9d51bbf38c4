"""Scale out without rewriting: the real CLI against PostgreSQL storage configured by ``deploy/dagster.postgres.yaml``.

A throwaway PostgreSQL cluster, a DAGSTER_HOME holding the deploy file unchanged (its connection comes from
env vars), and a temp project with 40 tasks x 4 rollouts in 4 shards. ``reverify backfill --parallel 2``
must record one run per shard plus the aggregate in PostgreSQL, run two shards at a time, keep the verify
steps inside the ``verifier`` pool limit, and produce exactly what one unsharded ``reverify run`` produces.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import psycopg2
import pytest

from reverify_assets.defs.dagster_internals import BulkActionStatus
from reverify_assets.defs.submitted_backfills import BACKFILL_TAG
from reverify_assets.synthetic.mcqa_rollouts import SyntheticSpec, write_mcqa_dataset
from tests.support.ci import service_missing
from tests.support.cli import CLI_LIMIT_S, ROOT, read_jsonl, run_reverify
from tests.support.instance import open_instance
from tests.support.postgres import PostgresServer, PostgresUnavailable, check_available, throwaway_postgres
from tests.support.process_tree import run_reaped

pytestmark = pytest.mark.slow

DEPLOY_CONFIG = ROOT / "deploy" / "dagster.postgres.yaml"
NAME = "scaleout"
OVERRIDE = "++mcqa.resources_servers.mcqa.grading_mode=lenient_boxed"
TASKS, ROLLOUTS_PER_TASK, SHARD_TASKS = 40, 4, 10
SHARDS = [f"main.s{n:05d}" for n in range(TASKS // SHARD_TASKS)]
# The verify step's key ends with the multi_asset's op name (today bare `rescore_shard`; a per-rescoring
# prefix, which two rescorings in one project need, keeps matching).
VERIFY_STEP_LIKE = "%rescore_shard"


@pytest.fixture
def postgres(monkeypatch: pytest.MonkeyPatch) -> Iterator[PostgresServer]:
    """A PostgreSQL server for this test only; its connection exported as the deploy file's env vars."""
    try:
        check_available()
    except PostgresUnavailable as exc:
        service_missing(f"PostgreSQL is unavailable: {exc}")
    with throwaway_postgres() as server:
        for name, value in server.env().items():
            monkeypatch.setenv(name, value)  # every `reverify` subprocess inherits them
        yield server


def write_project(root: Path) -> Path:
    """A project folder as a user has it: configs/mcqa.yaml, one rescoring, and its NeMo Gym files."""
    write_mcqa_dataset(root / "data", SyntheticSpec(tasks=TASKS, rollouts_per_task=ROLLOUTS_PER_TASK, seed=11))
    (root / "configs" / "rescorings").mkdir(parents=True)
    shutil.copy(ROOT / "configs" / "mcqa.yaml", root / "configs" / "mcqa.yaml")
    (root / "configs" / "rescorings" / f"{NAME}.yaml").write_text(
        "description: Synthetic mcqa rollouts re-scored on shared PostgreSQL storage.\n"
        "verifier:\n"
        "  config: [configs/mcqa.yaml]\n"
        f'  overrides: ["{OVERRIDE}"]\n'
        "sources:\n"
        "  inputs: data/rollouts_materialized_inputs.jsonl\n"
        "  rollouts: data/rollouts.jsonl\n"
        f"shard_tasks: {SHARD_TASKS}\n"
        f"output_dir: results/{NAME}\n"
    )
    return root


def shared_home(path: Path) -> Path:
    """A DAGSTER_HOME whose dagster.yaml is the deploy file itself: what docs/scale-out.md tells users to do."""
    path.mkdir()
    shutil.copy(DEPLOY_CONFIG, path / "dagster.yaml")
    return path


def cli(*args: str | Path, home: Path) -> str:
    result = run_reverify(*args, home=home)
    assert result.returncode == 0, f"reverify {' '.join(map(str, args))}:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def set_pool_limit(home: Path, pool: str, limit: int) -> None:
    """The way docs/scale-out.md gives a pool its own limit: Dagster's CLI, stored in the shared database."""
    dagster = Path(sys.executable).with_name("dagster")
    command = [str(dagster), "instance", "concurrency", "set", pool, str(limit)]
    result = run_reaped(command, env={**os.environ, "DAGSTER_HOME": str(home)}, timeout=CLI_LIMIT_S)
    assert result.returncode == 0, result.stderr


def query(server: PostgresServer, sql: str) -> list[tuple]:
    connection = psycopg2.connect(
        host=server.host, port=server.port, user=server.user, password=server.password, dbname=server.database
    )
    try:
        with connection.cursor() as cursor:
            cursor.execute(sql)
            return list(cursor.fetchall())
    finally:
        connection.close()


def overlaps(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def scored_by_key(path: Path) -> dict[tuple[int, int], tuple[float, object]]:
    return {
        (row["_ng_task_index"], row["_ng_rollout_index"]): (row["reward"], row.get("extracted_answer"))
        for row in read_jsonl(path)
    }


def test_a_parallel_backfill_on_postgres_honours_the_verifier_pool_and_matches_one_run(
    tmp_path: Path, postgres: PostgresServer
) -> None:
    project = write_project(tmp_path / "project")
    home = shared_home(tmp_path / "dagster_home")
    # Limit 1 (below the deploy file's default of 4): the verify steps must take turns, which shows the pool is
    # enforced through the shared database. Dagster's run queue (--parallel's) then holds a shard's run until the
    # pool has room for its verify step, rather than start a process to wait.
    set_pool_limit(home, "verifier", 1)

    shards = cli("shards", NAME, "--project", project, home=home)
    assert f"{len(SHARDS)} shards ({len(SHARDS)} new)" in shards, shards
    backfill = cli("backfill", NAME, "--project", project, "--parallel", "2", home=home)
    assert "aggregate: 160 rows from 4 shards" in backfill, backfill
    status = cli("status", NAME, "--project", project, home=home)
    assert "materialized 4, stale 0, failed 0, running 0, missing 0" in status, status

    # The run records, read from PostgreSQL itself: one run per shard and one aggregate, all successful.
    runs = query(
        postgres,
        "SELECT r.run_id, r.status, r.start_time, r.end_time, t.value FROM runs r "
        "LEFT JOIN run_tags t ON t.run_id = r.run_id AND t.key = 'dagster/partition/shard'",
    )
    assert {status for _, status, *_ in runs} == {"SUCCESS"}, runs
    shard_runs = {partition: (start, end) for _, _, start, end, partition in runs if partition is not None}
    assert sorted(shard_runs) == SHARDS and len(runs) == len(SHARDS) + 1, runs
    assert all(start is not None and end is not None and start < end for start, end in shard_runs.values())
    with open_instance(home) as instance:
        [backfill] = instance.get_backfills()
    assert backfill.status == BulkActionStatus.COMPLETED_SUCCESS, backfill
    backfill_runs = query(postgres, f"SELECT run_id FROM run_tags WHERE key = '{BACKFILL_TAG}'")
    assert len(backfill_runs) == len(runs), "a run of --parallel 2 was not its backfill's"

    # The verifier pool (limit 1): no two verify steps ever ran at once.
    events = query(
        postgres,
        "SELECT run_id, dagster_event_type, timestamp FROM event_logs "
        f"WHERE step_key LIKE '{VERIFY_STEP_LIKE}' AND dagster_event_type IN ('STEP_START', 'STEP_SUCCESS')",
    )
    steps: dict[str, dict[str, datetime]] = {}
    for run_id, kind, at in events:
        steps.setdefault(run_id, {})[kind] = at
    assert len(steps) == len(SHARDS), steps
    verify_windows = [(s["STEP_START"].timestamp(), s["STEP_SUCCESS"].timestamp()) for s in steps.values()]
    clashes = [(a, b) for i, a in enumerate(verify_windows) for b in verify_windows[i + 1 :] if overlaps(a, b)]
    assert not clashes, f"verify steps overlapped despite the verifier pool limit of 1: {clashes}"

    # Sharded and merged equals one unsharded run over the same files (a separate SQLite home: the run count
    # above stays exact).
    merged = next((project / "results" / NAME).glob("*/merged.jsonl"))
    single = tmp_path / "single" / "reverified.jsonl"
    single.parent.mkdir()
    cli(
        "run",
        "--config",
        project / "configs" / "mcqa.yaml",
        "--inputs",
        project / "data" / "rollouts_materialized_inputs.jsonl",
        "--rollouts",
        project / "data" / "rollouts.jsonl",
        "--output",
        single,
        OVERRIDE,
        home=tmp_path / "sqlite_home",
    )
    expected = scored_by_key(single)
    assert len(expected) == TASKS * ROLLOUTS_PER_TASK
    assert scored_by_key(merged) == expected
