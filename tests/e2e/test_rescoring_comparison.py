"""The comparison of a rescoring's variants in Dagster, and every verify step's flips against the stored rewards."""

from __future__ import annotations

import base64
import re
import shutil
from pathlib import Path
from typing import Any

import dagster as dg
import orjson
import pytest

from reverify_assets.cli.rescoring_runs import rescore_shard
from reverify_assets.compare.bootstrap import BootstrapSettings
from reverify_assets.compare.comparison import CompareRequest, run_comparison
from reverify_assets.defs.comparison_defs import ComparisonDefs, build_comparison
from reverify_assets.defs.rescoring_defs import build_rescoring_variants
from reverify_assets.rescoring.spec import find_rescoring
from tests.support.cli import (
    CONFORMANCE_ROLLOUTS,
    PNG_SIGNATURE,
    ROOT,
    read_jsonl,
    run_mcqa,
    run_reverify,
    scored_row,
    write_jsonl,
)
from tests.support.instance import latest_materialization, open_instance
from tests.support.project import LENIENT, VARIANTS, make_project

pytestmark = pytest.mark.slow
PAIR = "strict → lenient"


def embedded_png(markdown: str) -> bytes:
    found = re.fullmatch(r"!\[per-task Δ\]\(data:image/png;base64,([A-Za-z0-9+/=]+)\)", markdown)
    assert found, markdown[:80]
    return base64.b64decode(found.group(1))


def comparison_of(tmp_path: Path) -> ComparisonDefs:
    project = make_project(tmp_path, tasks=4)
    project.write_rescoring(extra=VARIANTS)
    comparison = build_comparison(build_rescoring_variants(find_rescoring(project.root, project.name)))
    assert comparison is not None and comparison.label == f"{project.name}__comparison"
    return comparison


def write_merged(comparison: ComparisonDefs, rewards: dict[str, list[float]]) -> None:
    """Each variant's merged output, as its aggregate writes it: 3 tasks of 2 rollouts."""
    for variant in comparison.variants:
        assert variant.variant is not None
        merged = variant.layout.merged
        merged.parent.mkdir(parents=True, exist_ok=True)
        values = rewards[variant.variant]
        write_jsonl(merged, [scored_row(i // 2, i % 2, r, variant.setup.config_hash) for i, r in enumerate(values)])


def test_the_comparison_asset_shows_the_flip_table_figures_and_the_per_task_histogram(tmp_path: Path) -> None:
    comparison = comparison_of(tmp_path)
    write_merged(comparison, {"strict": [0, 0, 1, 1, 0, 1], "lenient": [1, 1, 1, 0, 0, 1]})
    with dg.instance_for_test() as instance:
        result = dg.materialize([comparison.asset], instance=instance)
        assert result.success
        [event] = result.get_asset_materialization_events()
        metadata = {name: getattr(value, "value", value) for name, value in event.materialization.metadata.items()}
    assert metadata["baseline"] == "strict"
    text = metadata["comparison"]
    assert text.startswith(f"## {PAIR}\n") and "Coverage: 6 keys in both, 6 compared, 0 masked" in text
    assert "| baseline fail |              2 |              1 |     3 |" in text
    assert (metadata[f"{PAIR}: pass→fail"], metadata[f"{PAIR}: fail→pass"]) == (1, 2)
    assert metadata[f"{PAIR}: flip rate"] == pytest.approx(0.5) and metadata[f"{PAIR}: net change"] == 1
    assert metadata[f"{PAIR}: mean Δ"] == round(1 / 6, 4), "rounded to what it means"
    assert metadata[f"{PAIR}: mean Δ 95 % low"] <= metadata[f"{PAIR}: mean Δ"] <= metadata[f"{PAIR}: mean Δ 95 % high"]
    for figure in ("McNemar p", "Cohen's κ", "compared rows", "compared tasks"):
        assert isinstance(metadata[f"{PAIR}: {figure}"], int | float), figure
    png = embedded_png(metadata[f"{PAIR}: per-task Δ plot"])
    assert png.startswith(PNG_SIGNATURE) and len(png) <= 60_000
    # What the asset's page shows in place: Dagster renders markdown under 1,000 characters inline.
    bars, flips, figures = (metadata[f"{PAIR}: {name}"] for name in ("per-task Δ", "2×2 table", "figures"))
    assert "| 0 (unchanged) | 1 |" in bars and "| -0.50 to -0.25 | 1 |" in bars and "| +0.75 to +1.00 | 1 |" in bars
    assert "| baseline fail |              2 |              1 |     3 |" in flips
    assert "| flip rate " in figures and "| mean Δ " in figures
    assert max(len(bars), len(flips), len(figures)) < 1000
    report = Path(metadata[f"{PAIR}: report"])
    assert report.parent == comparison.variants[0].spec.outputs / "comparison"
    assert orjson.loads(report.read_bytes())["overall"]["binary"]["table"]["fail_to_pass"] == 2
    assert len(read_jsonl(Path(metadata[f"{PAIR}: flips"]))) == 3


def test_a_variant_output_of_mixed_configs_fails_the_step_naming_the_variant(tmp_path: Path) -> None:
    comparison = comparison_of(tmp_path)
    write_merged(comparison, {"strict": [0, 1], "lenient": [1, 1]})
    lenient = comparison.variants[1].layout.merged
    write_jsonl(lenient, [scored_row(0, 0, 1.0, "aaa"), scored_row(0, 1, 1.0, "bbb")])
    with dg.instance_for_test() as instance:
        result = dg.materialize([comparison.asset], instance=instance, raise_on_error=False)
    assert not result.success
    [failure] = [event for event in result.all_events if event.is_step_failure]
    message = failure.step_failure_data.error.message
    assert f"the merged output of variant 'lenient' ({lenient}) mixes rows of 2 verifier configs" in message
    assert (
        f"`one_verifier_config` check of {comparison.variants[0].spec.name}/lenient/aggregate_metrics_lenient"
        in message
    )
    assert not (comparison.variants[0].spec.outputs / "comparison").exists()


def copy_project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "configs" / "rescorings").mkdir(parents=True)
    shutil.copy(ROOT / "configs" / "mcqa.yaml", root / "configs" / "mcqa.yaml")
    shutil.copy(ROOT / "configs" / "rescorings" / "mcqa_grading_modes.yaml", root / "configs" / "rescorings")
    shutil.copytree(ROOT / "samples" / "mcqa", root / "samples" / "mcqa")
    return root


def table(metadata: dict[str, Any], prefix: str) -> tuple[int, int]:
    """(pass→fail, fail→pass) of a comparison pair's metadata."""
    return metadata[f"{prefix}pass→fail"], metadata[f"{prefix}fail→pass"]


def stored_table(metadata: dict[str, Any]) -> tuple[int, int]:
    """(pass→fail, fail→pass) against the rewards stored in the original rollouts."""
    return metadata["pass→fail vs original"], metadata["fail→pass vs original"]


def test_backfill_compares_the_variants_after_their_aggregates_as_reverify_compare_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, home = copy_project(tmp_path), tmp_path / "home"
    done = run_reverify("backfill", "mcqa_grading_modes", home=home, cwd=root)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    [compared] = [n for n, line in enumerate(lines) if line.startswith("mcqa_grading_modes__comparison: ")]
    assert compared == len(lines) - 1 and sum("aggregate: 300 rows" in line for line in lines[:compared]) == 2
    assert f"{PAIR}: 300 rows, 0 pass→fail, 39 fail→pass" in lines[compared]
    outputs = root / "results" / "rescorings" / "mcqa_grading_modes"
    [strict] = (outputs / "strict").glob("*/merged.jsonl")
    [lenient] = (outputs / "lenient").glob("*/merged.jsonl")
    cli = run_reverify("compare", strict, lenient, "--output", tmp_path / "cli.json", home=home)
    assert cli.returncode == 0, cli.stderr
    expected = orjson.loads((tmp_path / "cli.json").read_bytes())
    variant_defs = {v.variant: v for v in build_rescoring_variants(find_rescoring(root, "mcqa_grading_modes"))}
    with open_instance(home) as instance:
        metadata = latest_materialization_of(instance, "mcqa_grading_modes/comparison")
        shards = {
            variant: [
                latest_materialization_of(
                    instance,
                    f"mcqa_grading_modes/{variant}/reverified_shard_{variant}",
                    variant_defs[variant].partition_key(shard),
                )
                for shard in ("main.s00000", "main.s00001", "main.s00002")
            ]
            for variant in ("strict", "lenient")
        }
    binary = expected["overall"]["binary"]
    assert table(metadata, f"{PAIR}: ") == (binary["table"]["pass_to_fail"], binary["table"]["fail_to_pass"])
    # The UI's figures are the CLI's, rounded to what they mean.
    assert metadata[f"{PAIR}: McNemar p"] == float(f"{binary['mcnemar_p']:.3g}")
    assert metadata[f"{PAIR}: Cohen's κ"] == round(binary["kappa"]["value"], 4)
    interval = expected["overall"]["delta"]["interval"]
    assert (metadata[f"{PAIR}: mean Δ 95 % low"], metadata[f"{PAIR}: mean Δ 95 % high"]) == (
        round(interval["low"], 4),
        round(interval["high"], 4),
    ), "the asset's interval is the CLI's: same resamples and seed"
    assert embedded_png(metadata[f"{PAIR}: per-task Δ plot"]).startswith(PNG_SIGNATURE)
    assert (outputs / "comparison" / "strict_vs_lenient.md").read_text().startswith("# reverify compare")

    # Each shard's flips against the rewards the rollouts stored add up to `reverify compare rollouts merged`.
    rollouts = root / "samples" / "mcqa" / "rollouts.jsonl"
    for variant, merged in (("strict", strict), ("lenient", lenient)):
        against_stored = run_comparison(
            CompareRequest(baseline=rollouts, candidate=merged, bootstrap=BootstrapSettings(resamples=10, seed=0))
        )
        assert against_stored.overall.binary is not None
        expected_table = against_stored.overall.binary.table
        summed = tuple(map(sum, zip(*(stored_table(shard) for shard in shards[variant]), strict=True)))
        assert summed == (expected_table.pass_to_fail, expected_table.fail_to_pass), variant
        assert "| original | now pass | now fail | total |" in shards[variant][0]["flips vs original"]

    # A shard resumed after losing rows reports the flips of its whole output, not only of the rows it re-scored.
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    monkeypatch.chdir(root)
    lenient_defs = variant_defs["lenient"]
    shard_output = lenient_defs.layout.shard_output("main.s00002")
    shard_output.write_bytes(b"".join(shard_output.read_bytes().splitlines(keepends=True)[:70]))
    ok, described = rescore_shard(lenient_defs, "main.s00002")
    assert ok, described
    with open_instance(home) as instance:
        resumed = latest_materialization_of(
            instance, "mcqa_grading_modes/lenient/reverified_shard_lenient", lenient_defs.partition_key("main.s00002")
        )
    assert resumed["rows verified this run"] == 30 and resumed["rows compared with original"] == 100
    assert (
        stored_table(resumed) == stored_table(shards["lenient"][2])
        and resumed["flips vs original"] == shards["lenient"][2]["flips vs original"]
    )


def latest_materialization_of(instance: dg.DagsterInstance, asset: str, partition: str | None = None) -> dict[str, Any]:
    """The metadata values of the latest materialization of ``a/b/c`` (of one partition)."""
    partitions = None if partition is None else [partition]
    [record] = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey.from_user_string(asset), asset_partitions=partitions), limit=1
    ).records
    assert record.asset_materialization is not None
    return {name: getattr(v, "value", v) for name, v in record.asset_materialization.metadata.items()}


def test_reverified_rows_report_their_flips_against_the_stored_rewards_fresh_and_resumed(tmp_path: Path) -> None:
    home, output = tmp_path / "home", tmp_path / "out.jsonl"
    first = run_mcqa(output, LENIENT, home=home)
    assert first.returncode == 0, first.stderr
    report = run_comparison(
        CompareRequest(
            baseline=CONFORMANCE_ROLLOUTS, candidate=output, bootstrap=BootstrapSettings(resamples=10, seed=0)
        )
    )
    assert report.overall.binary is not None and report.overall.delta is not None
    expected = report.overall.binary.table
    with open_instance(home) as instance:
        fresh, _ = latest_materialization(instance, "reverified_rows")
    assert stored_table(fresh) == (expected.pass_to_fail, expected.fail_to_pass)
    assert fresh["flip rate vs original"] == round(report.overall.binary.flip_rate, 4)
    assert fresh["mean reward change"] == round(report.overall.delta.mean_delta, 4)
    assert fresh["rows compared with original"] == report.coverage.compared
    # Lose the last third of the output and resume: the whole file is counted again.
    kept = output.read_bytes().splitlines(keepends=True)
    output.write_bytes(b"".join(kept[: 2 * len(kept) // 3]))
    resumed_run = run_mcqa(output, LENIENT, "--resume", home=home)
    assert resumed_run.returncode == 0, resumed_run.stderr
    with open_instance(home) as instance:
        resumed, _ = latest_materialization(instance, "reverified_rows")
    assert resumed["rows already settled"] == 2 * len(kept) // 3
    assert stored_table(resumed) == stored_table(fresh) and resumed["flips vs original"] == fresh["flips vs original"]
