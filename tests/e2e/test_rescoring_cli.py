"""Sharded rescorings from the command line: shards, backfill, staleness after a verifier edit, gates."""

from __future__ import annotations

import os
from pathlib import Path

import dagster as dg
import orjson
import pytest

from reverify_assets.defs.dagster_internals import BulkActionStatus
from reverify_assets.defs.rescoring_defs import build_rescoring
from reverify_assets.defs.submitted_backfills import BACKFILL_TAG
from reverify_assets.gym.installation import PYTHON_ENV
from reverify_assets.rescoring.spec import find_rescoring
from tests.support.cli import read_jsonl, run_reverify
from tests.support.fake_verifier import FakeVerifier
from tests.support.instance import checked_partitions, latest_check, open_instance
from tests.support.project import STRICT, Project, make_project

pytestmark = pytest.mark.slow
VALID_BASE = "verifier: {config: [configs/mcqa.yaml]}\nsources: {inputs: a, rollouts: b}\noutput_dir: o\n"


def cli(project: Project, *args: str | Path, home: Path):
    result = run_reverify(*args, home=home, cwd=project.root)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def rewards(path: Path) -> dict[tuple[int, int], float]:
    return {(r["_ng_task_index"], r["_ng_rollout_index"]): r["reward"] for r in read_jsonl(path)}


def test_four_shard_backfill_equals_the_unsharded_run_then_goes_stale_after_a_verifier_edit_and_back(
    tmp_path: Path,
) -> None:
    project, home = make_project(tmp_path), tmp_path / "home"
    shown = cli(project, "shards", project.name, home=home)
    assert "4 shards (4 new): main.s00000, main.s00001, main.s00002, main.s00003" in shown
    assert "missing 4" in cli(project, "status", project.name, home=home)

    first = cli(project, "backfill", project.name, home=home)
    assert first.count(" rows, 0 failures, mean reward ") == 4 and "aggregate: 160 rows from 4 shards" in first
    assert "metrics cover 160 of 160 rollouts" in first, "the aggregate knows every shard's plan"
    assert "materialized 4, stale 0" in cli(project, "status", project.name, home=home)
    rescoring = build_rescoring(find_rescoring(project.root, project.name))
    with open_instance(home) as instance:
        for asset, check in (("shard_payloads", "join_complete"), ("reverified_shard", "failure_rate_within_limit")):
            partitions = checked_partitions(instance, f"{project.name}/{asset}", check)
            assert sorted(partitions) == [rescoring.partition_key(f"main.s{n:05d}") for n in range(4)], check

    unsharded = tmp_path / "unsharded.jsonl"
    cli(
        project,
        "run",
        "--config",
        project.root / "configs" / "mcqa.yaml",
        "--inputs",
        project.inputs,
        "--rollouts",
        project.rollouts,
        "--output",
        unsharded,
        "++mcqa.resources_servers.mcqa.grading_mode=lenient_boxed",
        home=home,
    )
    [lenient_dir] = [p for p in project.results().iterdir() if p.name != "index_cache"]
    merged = lenient_dir / "merged.jsonl"
    assert merged.read_bytes() == unsharded.read_bytes(), "same rows, same rewards, same bytes"
    ours = orjson.loads((lenient_dir / "merged_aggregate_metrics.json").read_bytes())
    reference = orjson.loads(unsharded.with_name("unsharded_aggregate_metrics.json").read_bytes())
    assert [e["key_metrics"] for e in ours] == [e["key_metrics"] for e in reference]
    # NeMo Gym's rollout health checks of the merged rows, where NeMo Gym is (CI has it): beside the merged file,
    # and recorded on the aggregate's partition. These rows carry no trajectory: every rollout is unobserved.
    if os.environ.get(PYTHON_ENV):
        assert "Rollout health: 160 checked, 0 healthy, 0 unhealthy, 160 unobserved" in first
        assert (lenient_dir / "quality_summary.json").is_file() and (lenient_dir / "rollout_verdicts.jsonl").is_file()
        with open_instance(home) as instance:
            check = latest_check(instance, f"{project.name}/aggregate_metrics", "rollout_health")
            assert check.passed and check.partition == lenient_dir.name

    # A verifier edit: every shard turns stale, and a backfill of the stale ones re-scores exactly those.
    project.write_rescoring(override=STRICT)
    status = cli(project, "status", project.name, home=home)
    assert "materialized 0, stale 4" in status and "stale: main.s00000 main.s00001 main.s00002 main.s00003" in status
    second = cli(project, "backfill", project.name, "--stale", home=home)
    assert "re-scoring 4 shards (stale)" in second
    assert "materialized 4, stale 0" in cli(project, "status", project.name, home=home)
    assert "re-scoring 0 shards" in cli(project, "backfill", project.name, "--stale", home=home)
    result_dirs = sorted(p.name for p in project.results().iterdir() if p.name != "index_cache")
    assert len(result_dirs) == 2, "the old config's results stay beside the new ones"
    assert lenient_dir.name in result_dirs and merged.exists()

    # The edit undone: the first config's results are current again, and nothing is re-scored.
    project.write_rescoring()
    assert "materialized 4, stale 0" in cli(project, "status", project.name, home=home)
    assert "re-scoring 0 shards" in cli(project, "backfill", project.name, "--no-aggregate", home=home)


def test_blocking_checks_keep_bad_shards_out_of_the_metrics(tmp_path: Path) -> None:
    project, home = make_project(tmp_path, tasks=20), tmp_path / "home"
    # Tasks 10..19 form shard 1; one of its rollouts loses its input row: the join is incomplete.
    rows = read_jsonl(project.inputs)
    project.inputs.write_bytes(
        b"".join(orjson.dumps(r) + b"\n" for r in rows if r["_ng_task_index"] != 12 or r["_ng_rollout_index"] != 1)
    )
    out = cli(project, "backfill", project.name, home=home)
    assert (
        "main.s00001: FAILED (shard main.s00001: join_complete failed: 1 rollouts without an input row ((12, 1)): "
        "not verified)" in out
    ), out
    assert "aggregate: 40 rows from 1 shards" in out
    assert "metrics cover 40 of 79 rollouts (39 missing)" in out, "the rows of the shard left out are missing"
    status = cli(project, "status", project.name, home=home)
    assert "materialized 1, stale 0, failed 1" in status and "failed: main.s00001" in status


def test_failure_rate_gate_with_a_failing_verifier(tmp_path: Path) -> None:
    project, home = make_project(tmp_path, tasks=20), tmp_path / "home"
    with FakeVerifier() as server:
        (project.root / "configs" / "fake.yaml").write_text(
            f"fake:\n  resources_servers:\n    fake_type:\n      url: {server.url}\n"
        )
        # The fake verifier answers 500 for rows whose input says so: make shard 0's rows fail.
        rows = read_jsonl(project.inputs)
        for row in rows:
            row["behaviour"] = "http500" if row["_ng_task_index"] < 10 else "ok"
        project.inputs.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
        project.write_rescoring(verifier="configs/fake.yaml", override="++fake.resources_servers.fake_type.note=x")
        out = cli(project, "backfill", project.name, home=home)
    assert "main.s00000: FAILED (1 blocking asset check failed" in out and "failure_rate_within_limit" in out
    assert "aggregate: 40 rows from 1 shards" in out
    assert "metrics cover 40 of 80 rollouts (40 verify_failed)" in out, "the failures of the shard left out count"


def test_shard_failures_by_class_count_each_failed_key_once_under_its_last_class(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = make_project(tmp_path, tasks=10)  # one shard, every row of it failing
    monkeypatch.setenv("NEMO_GYM_MAX_ROLLOUT_ATTEMPTS", "2")
    with FakeVerifier() as server:
        (project.root / "configs" / "fake.yaml").write_text(
            f"fake:\n  resources_servers:\n    fake_type:\n      url: {server.url}\n"
        )
        rows = read_jsonl(project.inputs)
        project.inputs.write_bytes(b"".join(orjson.dumps({**r, "behaviour": "http500"}) + b"\n" for r in rows))
        project.write_rescoring(verifier="configs/fake.yaml", override="++fake.resources_servers.fake_type.note=x")
        cli(project, "backfill", project.name, home=tmp_path / "first")
        [sidecar] = project.results().rglob("main.s00000_failures.jsonl")
        with open(sidecar, "ab") as fh:  # a second attempt of key (0, 0) without a class: it is maxed out
            fh.write(orjson.dumps({"_ng_task_index": 0, "_ng_rollout_index": 0}) + b"\n")
        # A fresh instance: the shard is missing again and resumes its files, a second attempt of every other key.
        cli(project, "backfill", project.name, home=tmp_path / "second")
    assert len(sidecar.read_bytes().splitlines()) == 2 * 40
    event = open_instance(tmp_path / "second").get_latest_materialization_event(
        dg.AssetKey([project.name, "reverified_shard"])
    )
    assert event is not None and event.asset_materialization is not None
    metadata = event.asset_materialization.metadata
    assert metadata["failures"].value == 40
    assert metadata["failures by class"].value == {"verify_failed": 39, "unknown": 1}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            VALID_BASE + "shard_tasks: 0\n",
            "field `shard_tasks`: Input should be greater than or equal to 1",
        ),
        (
            "verifier: {config: [configs/nope.yaml]}\nsources: {inputs: a, rollouts: b}\noutput_dir: o\n",
            "field `verifier.config`: file not found",
        ),
        ("verifier: {config: [configs/mcqa.yaml]}\noutput_dir: o\n", "give exactly one of `sources`"),
        (
            VALID_BASE + "colour: red\n",
            "field `colour`: Extra inputs are not permitted",
        ),
    ],
)
def test_invalid_rescoring_fails_definition_loading_naming_file_and_field(
    tmp_path: Path, content: str, message: str
) -> None:
    project = make_project(tmp_path, tasks=2)
    project.rescoring_file.write_text(content)
    result = run_reverify("status", project.name, home=tmp_path / "home", cwd=project.root)
    assert result.returncode == 1
    assert f"rescoring {project.rescoring_file}" in result.stderr and message in result.stderr
    import subprocess
    import sys

    dagster = Path(sys.executable).with_name("dagster")
    loaded = subprocess.run(
        [str(dagster), "definitions", "validate", "-w", "workspace.yaml"],
        cwd=project.root,
        capture_output=True,
        text=True,
        env={"DAGSTER_HOME": str(tmp_path), "PATH": "/usr/bin"},
    )
    assert loaded.returncode != 0 and message in loaded.stdout + loaded.stderr


def test_variants_are_groups_on_the_same_shards(tmp_path: Path) -> None:
    project, home = make_project(tmp_path, tasks=20), tmp_path / "home"
    project.write_rescoring(
        extra="variants:\n"
        f'  strict: {{overrides: ["{STRICT}"]}}\n'
        '  lenient: {overrides: ["++mcqa.resources_servers.mcqa.grading_mode=lenient_boxed"]}\n'
    )
    out = cli(project, "backfill", project.name, "--parallel", "2", home=home)
    assert "bench__strict: re-scoring 2 shards" in out and "bench__lenient: re-scoring 2 shards" in out
    assert out.count("aggregate: 80 rows from 2 shards") == 2
    # --parallel is Dagster's backfill, one per variant, its runs launched by the command's run queue.
    with open_instance(home) as instance:
        backfills = instance.get_backfills()
        runs = instance.get_runs()
    assert [b.status for b in backfills] == [BulkActionStatus.COMPLETED_SUCCESS] * 2, backfills
    tagged = sorted(tag for run in runs if (tag := run.tags.get(BACKFILL_TAG)))  # not the comparison's run
    assert tagged == sorted([backfill.backfill_id for backfill in backfills] * 3)  # 2 shards and the aggregate
    assert {run.status for run in runs} == {dg.DagsterRunStatus.SUCCESS}
    status = cli(project, "status", project.name, "--variant", "strict", home=home)
    assert "bench__strict: 2 shards" in status and "materialized 2" in status and "lenient" not in status
    means = {}
    for variant in ("strict", "lenient"):
        [merged] = (project.results() / variant).glob("*/merged.jsonl")
        means[variant] = sum(rewards(merged).values()) / 80
    assert means["lenient"] > means["strict"]
    bad = run_reverify("status", project.name, "--variant", "fuzzy", home=home, cwd=project.root)
    assert bad.returncode == 2 and "has no variant ['fuzzy']" in bad.stderr
