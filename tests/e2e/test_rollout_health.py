"""``reverify aggregate`` runs NeMo Gym's rollout health checks as ``gym eval aggregate`` does: the same two reports
beside the merged output as ``gym eval health-check`` writes for those rows, the same report lines, its flags, and
a WARN asset check ``rollout_health``; a crash of the checks does not fail the aggregate."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import orjson
import pytest

from reverify_assets.files.names import ROLLOUT_VERDICTS
from reverify_assets.gym.installation import PYTHON_ENV
from reverify_assets.gym.rollout_health import QUALITY_SUMMARY, HealthCheckSettings, RolloutHealthCheck
from tests.support.cli import MCQA_CONFIG, run_reverify
from tests.support.health_rows import rows_with_findings, write_rows
from tests.support.instance import latest_check, open_instance
from tests.support.nemo_gym import nemo_gym_python
from tests.support.process_tree import run_reaped

pytestmark = pytest.mark.slow
GYM_LIMIT_S = 600


@pytest.fixture(scope="module")
def gym_python() -> Path:
    return nemo_gym_python()


def shards(folder: Path, rows: list[dict]) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    half = len(rows) // 2
    write_rows(folder / "shard-a.jsonl", rows[:half])
    write_rows(folder / "shard-b.jsonl", rows[half:])
    return str(folder / "shard-*.jsonl")


def aggregate(tmp_path: Path, glob: str, output: Path, *flags: str, env_python: Path | None) -> str:
    env_before = os.environ.get(PYTHON_ENV)
    os.environ.pop(PYTHON_ENV, None)
    if env_python is not None:
        os.environ[PYTHON_ENV] = str(env_python)
    try:
        done = run_reverify(
            "aggregate", "--config", MCQA_CONFIG, "-i", glob, "-o", output, *flags, home=tmp_path / "home"
        )
    finally:
        os.environ.pop(PYTHON_ENV, None)
        if env_before is not None:
            os.environ[PYTHON_ENV] = env_before
    assert done.returncode == 0, done.stderr
    return done.stdout


def gym_health_check(gym_python: Path, rollouts: Path, run_dir: Path) -> str:
    """``gym eval health-check`` on a copy of ``rollouts`` in ``run_dir``: what it printed."""
    run_dir.mkdir()
    shutil.copyfile(rollouts, run_dir / rollouts.name)
    gym = gym_python.parent / "gym"
    done = run_reaped(
        [str(gym), "eval", "health-check", str(run_dir), "--rollouts-file", rollouts.name], timeout=GYM_LIMIT_S
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def parsed(folder: Path) -> tuple[dict, list[dict]]:
    summary = orjson.loads((folder / QUALITY_SUMMARY).read_bytes())
    verdicts = [orjson.loads(line) for line in (folder / ROLLOUT_VERDICTS).read_bytes().splitlines()]
    return summary, verdicts


def test_reports_equal_gym_eval_health_check_and_the_asset_check_warns(tmp_path: Path, gym_python: Path) -> None:
    output = tmp_path / "out" / "merged.jsonl"
    printed = aggregate(tmp_path, shards(tmp_path / "shards", rows_with_findings()), output, env_python=gym_python)

    gym_printed = gym_health_check(gym_python, output, tmp_path / "gym")
    ours, theirs = parsed(output.parent), parsed(tmp_path / "gym")
    assert ours == theirs
    summary, verdicts = ours
    assert summary["run"]["verdicts"] == {"healthy": 0, "unhealthy": 4, "unobserved": 4}
    assert {name for name, count in summary["run"]["issues"].items() if count} == {
        "record_unreadable",
        "rollout_ended_on_failed_model_call",
        "agent_turn_hollow",
        "model_call_zero_completion_tokens",
        "model_call_failed",
        "task_consistently_unhealthy",
    }
    assert len(verdicts) == 8
    # The report lines word for word, each naming its own folder's summary.
    assert gym_printed.replace(str(tmp_path / "gym"), str(output.parent)).strip() in printed
    assert not list(output.parent.glob(".rollout-health-*"))  # the scratch folder is gone

    check = latest_check(open_instance(tmp_path / "home"), "aggregated_shards", "rollout_health")
    assert not check.passed and check.severity.value == "WARN"
    metadata = {name: getattr(value, "value", value) for name, value in check.metadata.items()}
    assert (metadata["checked"], metadata["unhealthy"], metadata["unobserved"]) == (8, 4, 4)
    assert len(metadata["top findings by check"]) == 5 and metadata["top findings by check"]["model_call_failed"] == 1


def test_shards_not_merged_are_checked_where_they_are_and_the_flags_reach_nemo_gym(
    tmp_path: Path, gym_python: Path
) -> None:
    glob = shards(tmp_path / "shards", rows_with_findings())
    output = tmp_path / "out" / "merged.jsonl"
    printed = aggregate(
        tmp_path,
        glob,
        output,
        "++merge_shards=false",
        "--health-check-workers",
        "1",
        "--health-check-ignore",
        "model_call_failed, agent_turn_hollow",
        env_python=gym_python,
    )
    assert not output.exists()
    summary, verdicts = parsed(output.parent)
    assert summary["run"]["ignored_checks"] == ["agent_turn_hollow", "model_call_failed"]
    assert summary["run"]["issues"]["model_call_failed"] == 0
    assert len(verdicts) == 8
    assert "unobserved (ignored: agent_turn_hollow, model_call_failed)" in printed


def test_a_crash_of_the_checks_keeps_the_aggregate_and_is_said_once(tmp_path: Path, gym_python: Path) -> None:
    rows = rows_with_findings()
    rows[0]["stage_index"] = {"not": "a stage"}  # NeMo Gym's digest refuses it: its checks raise
    output = tmp_path / "out" / "merged.jsonl"
    printed = aggregate(tmp_path, shards(tmp_path / "shards", rows), output, env_python=gym_python)
    said = [line for line in printed.splitlines() if "health" in line.lower()]
    assert len(said) == 1, printed
    assert said[0].startswith("Rollout health checks failed after aggregation; aggregate artifacts are still available")
    assert output.is_file() and output.with_name("merged_aggregate_metrics.json").is_file()
    assert not (output.parent / QUALITY_SUMMARY).exists()
    check = latest_check(open_instance(tmp_path / "home"), "aggregated_shards", "rollout_health")
    assert not check.passed and check.description == said[0]


def test_no_health_check_writes_and_says_nothing(tmp_path: Path, gym_python: Path) -> None:
    output = tmp_path / "out" / "merged.jsonl"
    printed = aggregate(
        tmp_path, shards(tmp_path / "shards", rows_with_findings()), output, "--no-health-check", env_python=gym_python
    )
    assert "Rollout health" not in printed
    assert not (output.parent / QUALITY_SUMMARY).exists()


def test_without_nemo_gym_the_aggregate_says_once_how_to_have_the_checks(tmp_path: Path) -> None:
    if shutil.which("gym") is not None:
        pytest.skip("`gym` is on PATH: NeMo Gym is found there")
    output = tmp_path / "out" / "merged.jsonl"
    printed = aggregate(tmp_path, shards(tmp_path / "shards", rows_with_findings()), output, env_python=None)
    said = [line for line in printed.splitlines() if "health" in line.lower()]
    assert len(said) == 1 and said[0].startswith("Rollout health: not checked:"), printed
    assert "nemo-gym 0.7.0" in said[0] and "--no-health-check" in said[0]
    assert output.with_name("merged_aggregate_metrics.json").is_file()


def test_an_unknown_check_id_is_refused_before_anything_runs(tmp_path: Path) -> None:
    output = tmp_path / "out" / "merged.jsonl"
    done = run_reverify(
        "aggregate",
        "--config",
        MCQA_CONFIG,
        "-i",
        shards(tmp_path / "shards", rows_with_findings()),
        "-o",
        output,
        "--health-check-ignore",
        "model_call_failed,no_such_check",
        home=tmp_path / "home",
    )
    assert done.returncode == 2
    assert "--health-check-ignore: unknown rollout health check(s): no_such_check" in done.stderr
    assert not output.parent.exists()


def test_a_file_nemo_gym_cannot_read_is_one_line_naming_it(tmp_path: Path, gym_python: Path) -> None:
    missing = tmp_path / "gone.jsonl"
    outcome = RolloutHealthCheck(HealthCheckSettings(), gym_python).run([missing], tmp_path)
    assert outcome.health is None and outcome.failure is not None
    assert outcome.lines == (outcome.failure,) and str(missing) in outcome.failure
    assert not list(tmp_path.glob(".rollout-health-*"))


def test_the_check_ids_are_nemo_gyms(gym_python: Path) -> None:
    from reverify_assets.gym.rollout_health import HEALTH_CHECK_IDS

    done = run_reaped(
        [str(gym_python), "-c", "from nemo_gym.health.checks import CHECK_REGISTRY as r; print([s.id for s in r])"],
        timeout=GYM_LIMIT_S,
    )
    assert done.stdout.strip() == str(list(HEALTH_CHECK_IDS))


def test_a_second_aggregate_beside_the_first_takes_its_report_for_no_shard(tmp_path: Path, gym_python: Path) -> None:
    """The reports sit beside the merged output, where the shards of the next aggregate may be globbed."""
    folder = tmp_path / "res"
    glob = shards(folder, rows_with_findings())
    for _ in range(2):
        printed = aggregate(tmp_path, glob, folder / "merged.jsonl", env_python=gym_python)
        assert "Rollout health: 8 checked" in printed
    crashing = rows_with_findings()
    crashing[0]["stage_index"] = {"not": "a stage"}
    shards(folder, crashing)
    aggregate(tmp_path, glob, folder / "merged.jsonl", env_python=gym_python)
    # The reports of the aggregate before described rows no longer there.
    assert not (folder / QUALITY_SUMMARY).exists() and not (folder / ROLLOUT_VERDICTS).exists()


def test_thousands_of_shards_reach_nemo_gym(tmp_path: Path, gym_python: Path) -> None:
    """More shard paths than one command-line argument holds (128 KiB on Linux), as ++merge_shards=false gives."""
    folder = tmp_path / ("a-long-folder-name-" * 4)
    folder.mkdir()
    paths = [write_rows(folder / f"shard-{n:05d}.jsonl", [row]) for n, row in enumerate(rows_with_findings() * 300)]
    outcome = RolloutHealthCheck(HealthCheckSettings(), gym_python).run(paths, tmp_path)
    assert outcome.failure is None and outcome.health is not None, outcome.lines
    assert outcome.health.counts["checked"] == len(paths) == 2400
