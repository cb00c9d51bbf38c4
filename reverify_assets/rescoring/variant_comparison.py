"""A rescoring's verifier variants compared with its first one, as ``reverify compare`` compares two outputs.

Each pair's report (JSON and markdown) and flips file are written in one folder (the comparison asset's is
``<output_dir>/comparison/``), named by the two variants, each atomically: a comparison that fails leaves
the files of the last one that succeeded as they were.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from reverify_assets.compare.bootstrap import BootstrapSettings
from reverify_assets.compare.comparison import CompareRequest, compare_scorings
from reverify_assets.compare.key_metrics import HookChoice
from reverify_assets.compare.markdown import render_markdown
from reverify_assets.compare.report import CompareReport
from reverify_assets.errors import StateError
from reverify_assets.files.jsonl import AtomicWriter, write_json_atomic

# `reverify compare`'s defaults: the same merged outputs give the same interval from the asset and the CLI.
RESAMPLES = 10_000
SEED = 0


@dataclass(frozen=True)
class VariantPair:
    baseline: str  # variant names
    candidate: str
    baseline_output: Path  # each variant's merged output
    candidate_output: Path

    @property
    def label(self) -> str:
        return f"{self.baseline}_vs_{self.candidate}"


@dataclass(frozen=True)
class PairFiles:
    report: Path
    markdown: Path
    flips: Path

    @classmethod
    def under(cls, folder: Path, pair: VariantPair) -> PairFiles:
        return cls(
            report=folder / f"{pair.label}.json",
            markdown=folder / f"{pair.label}.md",
            flips=folder / f"{pair.label}_flips.jsonl",
        )


@dataclass(frozen=True)
class PairComparison:
    pair: VariantPair
    files: PairFiles
    report: CompareReport
    task_deltas: np.ndarray  # each compared task's mean reward change, candidate − baseline


def compare_pair(pair: VariantPair, folder: Path, hooks: HookChoice) -> PairComparison:
    """``hooks``: which metric hooks give a side's key metrics when it has no metrics file beside it. Refuses a
    side scored by several verifier configs (:class:`MixedConfigsError`) before writing anything."""
    for variant, output in ((pair.baseline, pair.baseline_output), (pair.candidate, pair.candidate_output)):
        if not output.is_file():
            raise StateError(
                f"variant {variant!r} has no merged output for its current verifier config ({output}): "
                "materialize its aggregate_metrics first",
                path=output,
            )
    files = PairFiles.under(folder, pair)
    comparison = compare_scorings(
        CompareRequest(
            baseline=pair.baseline_output,
            candidate=pair.candidate_output,
            bootstrap=BootstrapSettings(resamples=RESAMPLES, seed=SEED),
            hooks=hooks,
            flips=files.flips,
        )
    )
    write_json_atomic(files.report, comparison.report.model_dump(mode="json"))
    with AtomicWriter(files.markdown) as fh:
        fh.write(render_markdown(comparison.report).encode() + b"\n")
    return PairComparison(pair, files, comparison.report, comparison.task_deltas)
