"""``reverify compare`` end to end: the sample re-scored under two grading modes by the real CLI, then
compared with each other and with the original rollouts."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import MCQA_CONFIG, ROOT, read_jsonl, row_key, run_reverify, run_with_config

SAMPLE = ROOT / "samples" / "mcqa"
SAMPLE_INPUTS = SAMPLE / "rollouts_materialized_inputs.jsonl"
SAMPLE_ROLLOUTS = SAMPLE / "rollouts.jsonl"
MODES = ("strict_single_letter_boxed", "lenient_boxed")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("graded")
    outputs = {}
    for mode in MODES:
        output = root / f"{mode}.jsonl"
        override = f"++mcqa.resources_servers.mcqa.grading_mode={mode}"
        result = run_with_config(MCQA_CONFIG, SAMPLE_INPUTS, SAMPLE_ROLLOUTS, output, override, home=root / "home")
        assert result.returncode == 0, result.stderr
        outputs[mode] = output
    return outputs


def run_compare(
    tmp_path: Path, baseline: Path, candidate: Path, *flags: str
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any] | None]:
    report = tmp_path / "report.json"
    flags_with_output = ["--output", report, "--markdown", tmp_path / "report.md", *flags]
    result = run_reverify("compare", baseline, candidate, *flags_with_output, home=tmp_path / "home")
    return result, json.loads(report.read_text()) if report.exists() else None


def rewards(path: Path) -> dict[tuple[int, int], float]:
    return {row_key(row): float(row["reward"]) for row in read_jsonl(path)}


def assert_consistent(report: dict[str, Any], baseline: Path, candidate: Path, flips: Path) -> None:
    """Counts add up, and every figure agrees with the two files read whole."""
    coverage, overall = report["coverage"], report["overall"]
    before, after = rewards(baseline), rewards(candidate)
    assert coverage["baseline"]["rows"] == len(before) == coverage["in_both"] + coverage["baseline"]["only_here"]
    assert coverage["candidate"]["rows"] == len(after) == coverage["in_both"] + coverage["candidate"]["only_here"]
    assert coverage["in_both"] == len(before.keys() & after.keys())
    assert coverage["compared"] + coverage["masked"] == coverage["in_both"] == overall["rows"]
    table = overall["binary"]["table"]
    assert sum(table.values()) == overall["rows"]
    pairs = [(before[key], after[key]) for key in before.keys() & after.keys()]
    assert table == {
        "both_pass": pairs.count((1.0, 1.0)),
        "pass_to_fail": pairs.count((1.0, 0.0)),
        "fail_to_pass": pairs.count((0.0, 1.0)),
        "both_fail": pairs.count((0.0, 0.0)),
    }
    changed = sorted(key for key in before.keys() & after.keys() if before[key] != after[key])
    assert [row_key(line) for line in read_jsonl(flips)] == changed
    assert report["flips"] == {"path": str(flips), "rows": len(changed)}
    assert overall["delta"]["mean_delta"] == pytest.approx(sum(b - a for a, b in pairs) / len(pairs))
    interval = overall["delta"]["interval"]
    assert interval["low"] <= overall["delta"]["mean_delta"] <= interval["high"]
    (agents,) = [b for b in report["breakdowns"] if b["field"] == "agent_ref.name"]
    assert sum(group["figures"]["rows"] for group in agents["groups"]) == overall["rows"]


def test_strict_against_lenient(graded: dict[str, Path], tmp_path: Path) -> None:
    strict, lenient = graded["strict_single_letter_boxed"], graded["lenient_boxed"]
    result, report = run_compare(tmp_path, strict, lenient)
    assert result.returncode == 0, result.stderr
    assert report is not None
    assert_consistent(report, strict, lenient, tmp_path / "report_flips.jsonl")
    assert report["warnings"] == []
    assert report["overall"]["delta"]["mean_baseline"] == pytest.approx(0.41)
    assert report["overall"]["delta"]["mean_candidate"] == pytest.approx(0.54)
    sources = report["key_metrics"]["baseline_source"], report["key_metrics"]["candidate_source"]
    assert [source["kind"] for source in sources] == ["file", "file"]
    (agent,) = report["key_metrics"]["agents"]
    mean_reward = next(change for change in agent["changes"] if change["metric"] == "mean/reward")
    assert (mean_reward["baseline"], mean_reward["candidate"]) == (pytest.approx(0.41), pytest.approx(0.54))
    # What the demo prints, in the order a reader wants it.
    printed = result.stdout
    headings = ["## Coverage", "| baseline pass", "flip rate", "net change", "McNemar exact p", "Cohen's κ", "mean Δ"]
    headings += ["mean absolute Δ", "## Key metrics", "## By agent_ref.name"]
    positions = [printed.index(heading) for heading in headings]
    assert positions == sorted(positions)
    assert max(len(line) for line in printed.splitlines() if line.startswith("|")) <= 110
    assert (tmp_path / "report.md").read_text() == printed
    (tmp_path / "again").mkdir()
    _, again = run_compare(tmp_path / "again", strict, lenient)
    assert again is not None and again["overall"] == report["overall"], "the same seed gives the same figures"


def test_original_rollouts_against_a_reverified_output(graded: dict[str, Path], tmp_path: Path) -> None:
    lenient = graded["lenient_boxed"]
    result, report = run_compare(
        tmp_path, SAMPLE_ROLLOUTS, lenient, "--config", str(MCQA_CONFIG), "--by", "extracted_answer"
    )
    assert result.returncode == 0, result.stderr
    assert report is not None
    assert_consistent(report, SAMPLE_ROLLOUTS, lenient, tmp_path / "report_flips.jsonl")
    assert report["baseline"]["configs"] == {"original": 300}
    assert report["key_metrics"]["baseline_source"]["kind"] == "computed"
    assert report["key_metrics"]["candidate_source"]["kind"] == "file"
    assert [b["field"] for b in report["breakdowns"]] == ["agent_ref.name", "extracted_answer"]


def test_metrics_computed_from_rows_equal_the_metrics_file(graded: dict[str, Path], tmp_path: Path) -> None:
    strict = graded["strict_single_letter_boxed"]
    bare = shutil.copy(strict, tmp_path / "bare.jsonl")  # no metrics file beside it
    result, report = run_compare(tmp_path, Path(bare), strict, "--config", str(MCQA_CONFIG))
    assert result.returncode == 0, result.stderr
    assert report is not None
    (agent,) = report["key_metrics"]["agents"]
    assert len(agent["changes"]) == 6
    for change in agent["changes"]:
        assert change["baseline"] == pytest.approx(change["candidate"], rel=1e-12), change


def test_a_side_of_mixed_configs_is_refused_then_allowed(graded: dict[str, Path], tmp_path: Path) -> None:
    strict, lenient = graded["strict_single_letter_boxed"], graded["lenient_boxed"]
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_bytes(
        b"".join(
            strict.read_bytes().splitlines(keepends=True)[:120] + lenient.read_bytes().splitlines(keepends=True)[120:]
        )
    )
    hashes = {mode: read_jsonl(path)[0]["reverify_provenance"]["config_hash"] for mode, path in graded.items()}
    refused, report = run_compare(tmp_path, mixed, lenient)
    assert refused.returncode == 1
    assert report is None and not (tmp_path / "report_flips.jsonl").exists()
    expected = (
        f"{mixed} (baseline) mixes rows of 2 verifier configs: {hashes['lenient_boxed']} (180 rows), "
        f"{hashes['strict_single_letter_boxed']} (120 rows); pass --allow-mixed-configs to compare it anyway"
    )
    assert refused.stderr.strip() == f"reverify: error: {expected}"

    allowed, report = run_compare(tmp_path, mixed, lenient, "--allow-mixed-configs")
    assert allowed.returncode == 0, allowed.stderr
    assert report is not None
    assert len(report["warnings"]) == 1 and "compared anyway (--allow-mixed-configs)" in report["warnings"][0]
    assert f"> **Warning:** {report['warnings'][0]}" in (tmp_path / "report.md").read_text()
    assert report["baseline"]["configs"] == {hashes["lenient_boxed"]: 180, hashes["strict_single_letter_boxed"]: 120}
    assert_consistent(report, mixed, lenient, tmp_path / "report_flips.jsonl")
