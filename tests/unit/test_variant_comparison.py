"""The library under the rescoring comparison asset: per-task changes, the histogram PNG, the headline markdown
and one pair of variants compared into its folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from reverify_assets.compare.bootstrap import BootstrapSettings, task_mean_deltas
from reverify_assets.compare.comparison import CompareRequest, compare_scorings, run_comparison
from reverify_assets.compare.delta_plot import task_delta_histogram
from reverify_assets.compare.key_metrics import HookChoice
from reverify_assets.compare.markdown import render_headline
from reverify_assets.compare.provenance import MixedConfigsError
from reverify_assets.errors import StateError
from reverify_assets.rescoring.variant_comparison import VariantPair, compare_pair
from tests.support.cli import PNG_SIGNATURE, scored_row, write_jsonl

MAX_PNG_BYTES = 60_000


def row(task: int, rollout: int, reward: float, config: str = "c1") -> dict[str, Any]:
    return scored_row(task, rollout, reward, config)


def sides(tmp_path: Path) -> tuple[Path, Path]:
    """Task 0: 2 of 4 rows gain a pass; task 1: one loses it; task 2: unchanged."""
    before = [row(t, r, 0.0 if (t, r) in {(0, 0), (0, 1)} else 1.0) for t in range(3) for r in range(4)]
    after = [row(t, r, 0.0 if (t, r) == (1, 3) else 1.0, config="c2") for t in range(3) for r in range(4)]
    (tmp_path / "a").mkdir(exist_ok=True)
    (tmp_path / "b").mkdir(exist_ok=True)
    return write_jsonl(tmp_path / "a" / "merged.jsonl", before), write_jsonl(tmp_path / "b" / "merged.jsonl", after)


def test_task_mean_deltas_average_each_tasks_rows_in_task_order() -> None:
    deltas, tasks = np.array([1.0, 0.0, -1.0, 0.5, 0.5]), np.array([7, 7, 3, 9, 9])
    assert task_mean_deltas(deltas, tasks).tolist() == [-1.0, 0.5, 0.5]
    assert task_mean_deltas(np.array([]), np.array([], dtype=np.int64)).size == 0


def test_the_comparison_gives_its_per_task_changes_beside_the_same_report(tmp_path: Path) -> None:
    baseline, candidate = sides(tmp_path)
    request = CompareRequest(baseline=baseline, candidate=candidate, bootstrap=BootstrapSettings(resamples=50, seed=0))
    comparison = compare_scorings(request)
    assert comparison.task_deltas.tolist() == [0.5, -0.25, 0.0]
    assert comparison.report == run_comparison(request)


@pytest.mark.parametrize(
    "deltas",
    [
        np.array([0.25]),
        np.array([-0.5, -0.25, 0.0, 0.0, 0.25, 0.5, 0.75, 1.0, -1.0]),
        np.random.default_rng(0).normal(0.05, 0.1, size=100_000),  # more values than bars: binned
        np.array([]),
    ],
)
def test_the_histogram_is_a_small_png_and_the_same_numbers_give_the_same_bytes(deltas: np.ndarray) -> None:
    png = task_delta_histogram(deltas, title="strict → lenient")
    assert png.startswith(PNG_SIGNATURE) and len(png) <= MAX_PNG_BYTES
    assert task_delta_histogram(deltas, title="strict → lenient") == png


def test_the_headline_holds_coverage_the_two_by_two_table_and_the_figures(tmp_path: Path) -> None:
    baseline, candidate = sides(tmp_path)
    report = run_comparison(
        CompareRequest(baseline=baseline, candidate=candidate, bootstrap=BootstrapSettings(resamples=50, seed=0))
    )
    text = render_headline(report, "a → b")
    assert text.startswith("## a → b\n")
    assert "Coverage: 12 keys in both, 12 compared, 0 masked" in text
    assert "| baseline pass |              9 |              1 |    10 |" in text
    for figure in ("flip rate", "net change", "McNemar exact p", "Cohen's κ", "mean Δ", "95 % CI"):
        assert figure in text


def test_a_pair_of_variants_writes_its_report_markdown_and_flips(tmp_path: Path) -> None:
    baseline, candidate = sides(tmp_path)
    folder = tmp_path / "comparison"
    done = compare_pair(VariantPair("a", "b", baseline, candidate), folder, HookChoice(None))
    assert sorted(p.name for p in folder.iterdir()) == ["a_vs_b.json", "a_vs_b.md", "a_vs_b_flips.jsonl"]
    assert orjson.loads(done.files.report.read_bytes()) == done.report.model_dump(mode="json")
    assert done.files.markdown.read_text().startswith("# reverify compare: merged.jsonl → merged.jsonl")
    assert len(done.files.flips.read_bytes().splitlines()) == 3 == done.report.overall.delta.changed
    assert done.task_deltas.tolist() == [0.5, -0.25, 0.0]


def test_a_missing_or_mixed_side_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    baseline, candidate = sides(tmp_path)
    folder = tmp_path / "comparison"
    with pytest.raises(StateError) as missing:
        compare_pair(VariantPair("a", "b", baseline, tmp_path / "b" / "gone.jsonl"), folder, HookChoice(None))
    assert missing.value.path == tmp_path / "b" / "gone.jsonl"
    assert "materialize its aggregate_metrics first" in str(missing.value)  # what to do about it
    write_jsonl(candidate, [row(0, 0, 1.0, config="c2"), row(0, 1, 1.0, config="c3")])
    with pytest.raises(MixedConfigsError) as refused:
        compare_pair(VariantPair("a", "b", baseline, candidate), folder, HookChoice(None))
    assert refused.value.role == "candidate" and refused.value.path == candidate
    assert dict(refused.value.configs) == {"c2": 1, "c3": 1}
    assert not folder.exists()
