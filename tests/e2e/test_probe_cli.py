"""``reverify probe``: a deterministic server (the built-in mcqa, started afresh for each pass), a drifted config,
a deliberately stateful server, and ``reverify run --force`` printing what the probe found."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import orjson
import pytest

from reverify_assets.defs.rescoring_defs import RescoringDefs, asset_key, build_rescoring
from reverify_assets.rescoring.spec import find_rescoring
from tests.support.cli import (
    CONFORMANCE_INPUTS,
    CONFORMANCE_ROLLOUTS,
    MCQA_CONFIG,
    fake_dataset,
    run_reverify,
    run_with_config,
    url_config,
)
from tests.support.fake_verifier import FakeVerifier
from tests.support.project import make_project

pytestmark = pytest.mark.slow


def probe(config: Path, inputs: Path, rollouts: Path, *flags: str, home: Path) -> tuple[str, dict]:
    done = run_reverify("probe", "--config", config, "--inputs", inputs, "--rollouts", rollouts, *flags, home=home)
    assert done.returncode == 0, done.stderr
    [kept] = (home / "reverify_probes").glob("*.json")
    return done.stdout, orjson.loads(kept.read_bytes())


def test_a_deterministic_server_that_matches_the_stored_rewards(tmp_path: Path) -> None:
    # The conformance rollouts stored the rewards of NeMo Gym's mcqa under the rows' own grading mode (the config's).
    stdout, report = probe(
        MCQA_CONFIG, CONFORMANCE_INPUTS, CONFORMANCE_ROLLOUTS, "--sample", "60", "--seed", "4", home=tmp_path / "h"
    )
    assert report["sampled_rows"] == 60 and report["rows_by_agent"] == {"mcqa_simple_agent": 60}
    assert report["separate_processes"] is True and report["reverify_modes"] == {"mcqa": "stateless"}
    assert report["between_passes"]["agree"] == report["between_passes"]["rows"] == 60
    assert report["with_stored"]["agree"] == report["with_stored"]["rows"] == 60
    assert report["verdict"].startswith("CONSISTENT WITH STATELESS: two separately started servers agree on all 60")
    assert f"Verdict: {report['verdict']}" in stdout
    assert "between the two passes: 60 of 60 rows agree (100.0%), κ 1.000" in stdout


def test_another_grading_mode_shows_as_drift_from_the_stored_rewards(tmp_path: Path) -> None:
    mode = "++mcqa.resources_servers.mcqa.grading_mode=lenient_answer_colon"
    _, report = probe(MCQA_CONFIG, CONFORMANCE_INPUTS, CONFORMANCE_ROLLOUTS, mode, home=tmp_path / "h")
    assert report["sampled_rows"] == 180
    assert report["between_passes"]["agree"] == 180
    differ = report["with_stored"]["rows"] - report["with_stored"]["agree"]
    assert differ == 75 and len(report["stored_disagreements"]) == differ  # NeMo Gym's own answer for this mode
    assert report["verdict"].startswith(f"DETERMINISTIC, BUT DRIFTED: both passes agree on all 180 rows, and {differ}")


def test_a_stateful_server_is_caught_and_a_forced_run_says_so(tmp_path: Path) -> None:
    inputs, rollouts = fake_dataset(tmp_path, ["stateful"] * 20)
    home = tmp_path / "h"
    # Another copy of the server (its url is no part of the config hash), so the probed one starts with no state.
    with FakeVerifier(reverify_mode="unknown") as other:
        config = url_config(tmp_path, other.url)
        before = run_with_config(config, inputs, rollouts, tmp_path / "before.jsonl", "--force", home=home)
        assert before.returncode == 0, before.stderr
        assert "No probe of verifier config" in before.stderr and "`reverify probe`" in before.stderr
    with FakeVerifier(reverify_mode="unknown") as server:
        config = url_config(tmp_path, server.url)
        stdout, report = probe(config, inputs, rollouts, home=home)
        assert report["separate_processes"] is False  # a url server answers both passes
        assert report["between_passes"]["agree"] == 0 and report["between_passes"]["rows"] == 40
        assert len(report["pass_disagreements"]) == 40
        assert {(row["first"], row["second"]) for row in report["pass_disagreements"]} == {(1.0, 0.0)}
        assert report["verdict"].startswith("NOT DETERMINISTIC: 40 of 40 rows got different rewards from one server")
        assert "disagreeing keys (passes): (0, 0) 1→0" in stdout

        forced = run_with_config(config, inputs, rollouts, tmp_path / "after.jsonl", "--force", home=home)
        assert forced.returncode == 0, forced.stderr
        assert f"Probe of verifier config {report['verifier_config_hash']} (" in forced.stderr
        assert "NOT DETERMINISTIC: 40 of 40" in forced.stderr


def test_a_rescorings_probe_asset_and_its_warning_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The probe as the Dagster UI materializes it: an asset of the rescoring's group, a WARN check, and the
    report kept where a forced CLI run of the same config finds it."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    project = make_project(tmp_path, tasks=30)
    rescoring = build_rescoring(find_rescoring(project.root, project.name))
    probe_asset = next(asset for asset in rescoring.assets if probe_key(rescoring) in asset.keys)
    with dg.DagsterInstance.get() as instance:
        result = dg.materialize([probe_asset], partition_key=rescoring.setup.config_hash, instance=instance)
        assert result.success
        [materialization] = result.asset_materializations_for_node(probe_asset.node_def.name)
        metadata = {name: getattr(value, "value", value) for name, value in materialization.metadata.items()}
        assert metadata["rows sampled"] == 120 and metadata["agreement between passes"] == 1.0
        # The synthetic rollouts stored rewards of another grading mode: deterministic, and drifted from them.
        assert str(metadata["verdict"]).startswith("DETERMINISTIC, BUT DRIFTED: both passes agree on all 120 rows")
        [check] = result.get_asset_check_evaluations()
        assert check.check_name == "stateless_evidence" and check.passed
        assert check.severity == dg.AssetCheckSeverity.WARN
    assert (home / "reverify_probes" / f"{rescoring.setup.config_hash}.json").is_file()


def probe_key(rescoring: RescoringDefs) -> dg.AssetKey:
    return asset_key(rescoring.spec, rescoring.variant, "verifier_probe")
