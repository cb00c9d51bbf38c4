"""What the comparison asset shows in the Dagster UI: per pair of variants, its headline markdown, its figures
as numbers (plotted across materializations) and as a table narrow enough for the asset page at 1400 px, its
files, and the per-task change as a bar chart and as an embedded PNG."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

import dagster as dg

from reverify_assets.compare.delta_bars import delta_bars
from reverify_assets.compare.delta_plot import task_delta_histogram
from reverify_assets.compare.markdown import render_flip_table, render_headline, render_narrow_figures
from reverify_assets.defs.metadata import figure, p_value
from reverify_assets.rescoring.variant_comparison import PairComparison


def pair_title(comparison: PairComparison) -> str:
    return f"{comparison.pair.baseline} → {comparison.pair.candidate}"


def comparison_metadata(comparisons: Sequence[PairComparison]) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "baseline": comparisons[0].pair.baseline,
        "comparison": dg.MetadataValue.md("\n\n".join(render_headline(c.report, pair_title(c)) for c in comparisons)),
    }
    for comparison in comparisons:
        metadata.update(pair_metadata(comparison))
    return metadata


def pair_metadata(comparison: PairComparison) -> dict[str, Any]:
    title, report, files = pair_title(comparison), comparison.report, comparison.files
    figures = report.overall
    values: dict[str, Any] = {"compared rows": figures.rows, "compared tasks": figures.tasks}
    if figures.binary is not None:
        binary = figures.binary
        values |= {
            "pass→fail": binary.table.pass_to_fail,
            "fail→pass": binary.table.fail_to_pass,
            "flip rate": figure(binary.flip_rate),
            "net change": binary.net_change,
            "McNemar p": p_value(binary.mcnemar_p),
        }
        if binary.kappa.value is not None:
            values["Cohen's κ"] = figure(binary.kappa.value)
    if figures.delta is not None:
        delta = figures.delta
        values |= {
            "mean Δ": figure(delta.mean_delta),
            "mean Δ 95 % low": figure(delta.interval.low),
            "mean Δ 95 % high": figure(delta.interval.high),
            # More of the figures table's numbers, for the UI to plot across materializations too.
            "baseline mean reward": figure(delta.mean_baseline),
            "candidate mean reward": figure(delta.mean_candidate),
            "mean absolute Δ": figure(delta.mean_abs_delta),
            "rows changed": delta.changed,
        }
    metadata = {f"{title}: {name}": value for name, value in values.items()}
    # Shown in place on the asset's page (markdown under 1,000 characters); the plot, longer, behind a click. The
    # figures narrow: the whole report's table, its details in parentheses, ran past the page at 1400 px.
    metadata[f"{title}: 2×2 table"] = dg.MetadataValue.md(render_flip_table(report))
    metadata[f"{title}: figures"] = dg.MetadataValue.md(render_narrow_figures(report))
    metadata[f"{title}: per-task Δ"] = dg.MetadataValue.md(delta_bars(comparison.task_deltas))
    png = task_delta_histogram(comparison.task_deltas, title=f"per-task mean reward change, {title}")
    metadata[f"{title}: per-task Δ plot"] = dg.MetadataValue.md(
        f"![per-task Δ](data:image/png;base64,{base64.b64encode(png).decode()})"
    )
    metadata[f"{title}: report"] = dg.MetadataValue.path(str(files.report))
    metadata[f"{title}: markdown report"] = dg.MetadataValue.path(str(files.markdown))
    if report.flips is not None:
        metadata[f"{title}: flips"] = dg.MetadataValue.path(report.flips.path)
    return metadata
