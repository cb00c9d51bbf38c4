"""The report as markdown whose tables are aligned, so it reads as plain text at 80–110 columns too
(it is what ``reverify compare`` prints)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from reverify_assets.compare.breakdown import Breakdown
from reverify_assets.compare.figures import DeltaFigures, PairedFigures
from reverify_assets.compare.key_coverage import Coverage, SideCoverage
from reverify_assets.compare.key_metrics import KeyMetricsComparison
from reverify_assets.compare.paired_stats import BinaryFigures, PassFailTable
from reverify_assets.compare.provenance import ORIGINAL
from reverify_assets.compare.report import CompareReport, NoiseFloor, SideSummary

NONE = "—"


def render_markdown(report: CompareReport) -> str:
    title = f"# reverify compare: {Path(report.baseline.path).name} → {Path(report.candidate.path).name}"
    lines = [title, ""]
    lines += _sides(report)
    lines += _coverage(report.coverage)
    lines += _overall(report.overall)
    lines += _key_metrics(report.key_metrics)
    for breakdown in report.breakdowns:
        lines += _breakdown(breakdown)
    if report.flips is not None:
        lines += [f"Rows whose reward changed: {report.flips.rows}, in `{report.flips.path}`.", ""]
    if report.noise is not None:
        lines += _noise_floor(report.noise)
    return "\n".join(lines)


def _noise_floor(noise: NoiseFloor) -> list[str]:
    excess = noise.excess
    kappa = "undefined" if noise.fleiss_kappa is None else f"{noise.fleiss_kappa:.3f}"
    lines = [
        "## Against the noise floor",
        "",
        f"`{noise.path}`: verifier config {noise.verifier_config_hash}, {noise.rows_measured} rows scored "
        f"{noise.scorings} times, noise flip rate {excess.noise_flip_rate:.2%} (± {excess.noise_flip_rate_se:.2%}), "
        f"Fleiss' κ {kappa}.",
        "",
        f"- {excess.observed_flips} of the {excess.rows} compared rows changed reward; noise alone would change "
        f"{excess.expected_noise_flips:.1f} (95 % of the time at most {excess.noise_flips_upper_95}, the noise "
        "floor's own sampling error allowed for)",
        f"- {excess.flips_beyond_noise:.1f} changes beyond the noise; P(noise alone changes {excess.observed_flips} "
        f"or more) = {excess.p_value:.3g}",
    ]
    if not noise.measured_on_a_side:
        lines.append("- the noise was measured with a config that scored neither side")
    return [*lines, ""]


def render_headline(report: CompareReport, title: str) -> str:
    """The coverage counts, the 2×2 table and the headline figures, under ``title``: what a dashboard shows of
    a comparison (:func:`render_markdown` is the whole report)."""
    coverage, figures = report.coverage, report.overall
    baseline, candidate = coverage.baseline, coverage.candidate
    lines = [f"## {title}", "", *_sides(report)]
    lines += [
        f"Coverage: {coverage.in_both} keys in both, {coverage.compared} compared, {coverage.masked} masked; "
        f"only in baseline {baseline.only_here}, only in candidate {candidate.only_here}; failed and not in the "
        f"output: baseline {baseline.failed_not_in_output}, candidate {candidate.failed_not_in_output}.",
        "",
        f"Rewards of the {figures.rows} compared rows ({figures.tasks} tasks):",
        "",
    ]
    return "\n".join([*lines, *_overall_body(figures)])


def render_flip_table(report: CompareReport) -> str:
    """The 2×2 table alone (:func:`render_figures`, the figures): each short enough for a dashboard to show in
    place."""
    return "\n".join(_flip_lines(report.overall))


def render_figures(report: CompareReport) -> str:
    return "\n".join(_figure_lines(report.overall))


def render_narrow_figures(report: CompareReport) -> str:
    """What :func:`render_figures` says, for a narrow column: a row per figure, no value over ~23 characters,
    where its cells hold several in parentheses. The Dagster UI's asset page at 1400 px leaves a metadata value
    about 400 px and never wraps a table cell. Nor are notes below the table a way out: text wraps at the value
    column's width, which a long file path in another value widens past the page; only κ's rare undefined
    reason stays there, as in :func:`render_figures`."""
    figures = report.overall
    if figures.delta is None:
        return render_figures(report)
    binary, delta, interval = figures.binary, figures.delta, figures.delta.interval
    rows: list[list[str]] = []
    if binary is not None:
        table, kappa = binary.table, binary.kappa
        rows += [
            ["flip rate", f"{_percent(binary.flip_rate)} ({table.discordant} of {table.rows})"],
            ["net change", f"{binary.net_change:+d} rows ({_percent(binary.net_change_rate, signed=True)})"],
            ["McNemar exact p", _p_value(binary.mcnemar_p)],
            ["Cohen's κ", _kappa(kappa.value)],
            ["agreement", f"{kappa.observed_agreement:.3f} observed"],
            ["", f"{kappa.expected_agreement:.3f} expected"],
        ]
    rows += [
        ["mean reward", f"{delta.mean_baseline:.4f} → {delta.mean_candidate:.4f}"],
        ["mean Δ", f"{delta.mean_delta:+.4f}"],
        [f"{interval.confidence * 100:g} % CI", f"[{interval.low:+.4f}, {interval.high:+.4f}]"],
        ["resamples", f"{interval.resamples} of {interval.tasks} tasks"],
        ["seed", str(interval.seed)],
        ["mean absolute Δ", f"{delta.mean_abs_delta:.4f}"],
        ["rows changed", f"{delta.changed} of {figures.rows}"],
    ]
    lines = _table(["figure", "value"], rows, right=set())
    reason = None if binary is None else binary.kappa.undefined_reason
    return "\n".join(lines if reason is None else [*lines, "", f"κ {reason}"])


def _sides(report: CompareReport) -> list[str]:
    def side(role: str, summary: SideSummary, coverage: SideCoverage) -> str:
        configs = ", ".join(
            f"{'no provenance, original scores' if label == ORIGINAL else f'config {label}'} ({rows} rows)"
            for label, rows in summary.configs.items()
        )
        return f"- {role}: `{summary.path}`, {coverage.rows} rows; {configs or 'no rows'}"

    lines = [
        side("baseline", report.baseline, report.coverage.baseline),
        side("candidate", report.candidate, report.coverage.candidate),
        "",
    ]
    lines += [f"> **Warning:** {warning}" for warning in report.warnings]
    return [*lines, ""] if report.warnings else lines


def _coverage(coverage: Coverage) -> list[str]:
    def failed(role: str, side: SideCoverage) -> list[list[str]]:
        if side.sidecar is None:
            return [[f"failed in the {role} sidecar (there is none)", NONE]]
        classes = ", ".join(f"{name} {count}" for name, count in side.failed_by_class.items())
        return [
            [f"failed in the {role} sidecar" + (f" ({classes})" if classes else ""), str(side.failed_keys)],
            [f"… of which not in the {role} output", str(side.failed_not_in_output)],
        ]

    rows = [
        ["baseline", str(coverage.baseline.rows)],
        ["candidate", str(coverage.candidate.rows)],
        ["in both", str(coverage.in_both)],
        ["compared (in both, neither masked)", str(coverage.compared)],
        ["masked on either side (left out)", str(coverage.masked)],
        ["only in baseline", str(coverage.baseline.only_here)],
        ["… of which failed in the candidate sidecar", str(coverage.only_baseline_failed_in_candidate)],
        ["only in candidate", str(coverage.candidate.only_here)],
        ["… of which failed in the baseline sidecar", str(coverage.only_candidate_failed_in_baseline)],
        *failed("baseline", coverage.baseline),
        *failed("candidate", coverage.candidate),
        ["failed in a sidecar, in neither output", str(coverage.failed_in_neither_output)],
    ]
    return ["## Coverage", "", *_table(["keys", "rows"], rows, right={1}), ""]


def _overall(figures: PairedFigures) -> list[str]:
    return [f"## Rewards of the {figures.rows} compared rows ({figures.tasks} tasks)", "", *_overall_body(figures)]


def _overall_body(figures: PairedFigures) -> list[str]:
    return [*_flip_lines(figures), "", *_figure_lines(figures), ""]


def _flip_lines(figures: PairedFigures) -> list[str]:
    if figures.binary is None:
        return [f"2×2 table, McNemar's test and Cohen's κ: omitted: {figures.binary_omitted}."]
    return _pass_fail_table(figures.binary.table)


def _figure_lines(figures: PairedFigures) -> list[str]:
    if figures.delta is None:
        return [f"Reward change: omitted: {figures.delta_omitted}."]
    rows = [] if figures.binary is None else _pass_fail_rows(figures.binary)
    rows += _delta_rows(figures.delta, figures.rows)
    table = _table(["figure", "value"], rows, right=set())
    # Below the table, not in it: a cell that long would pad every row to its width, past what the Dagster UI
    # shows in place.
    reason = None if figures.binary is None else figures.binary.kappa.undefined_reason
    return table if reason is None else [*table, "", f"κ {reason}"]


def _pass_fail_rows(binary: BinaryFigures) -> list[list[str]]:
    table, kappa = binary.table, binary.kappa
    return [
        ["flip rate", f"{_percent(binary.flip_rate)} ({table.discordant} of {table.rows} rows)"],
        [
            "net change",
            f"{binary.net_change:+d} rows ({_percent(binary.net_change_rate, signed=True)}): "
            f"{table.fail_to_pass} fail→pass, {table.pass_to_fail} pass→fail",
        ],
        ["McNemar exact p", f"{_p_value(binary.mcnemar_p)} ({table.discordant} discordant pairs)"],
        [
            "Cohen's κ",
            f"{_kappa(kappa.value)} (observed agreement {kappa.observed_agreement:.3f}, "
            f"expected {kappa.expected_agreement:.3f})",
        ],
    ]


def _delta_rows(delta: DeltaFigures, rows: int) -> list[list[str]]:
    interval = delta.interval
    return [
        ["mean reward", f"{delta.mean_baseline:.4f} → {delta.mean_candidate:.4f} ({rows} rows)"],
        [
            "mean Δ",
            f"{delta.mean_delta:+.4f}, {interval.confidence * 100:g} % CI [{interval.low:+.4f}, {interval.high:+.4f}]",
        ],
        ["", f"({interval.resamples} resamples of the {interval.tasks} tasks, seed {interval.seed})"],
        ["mean absolute Δ", f"{delta.mean_abs_delta:.4f} ({delta.changed} rows changed)"],
    ]


def _pass_fail_table(table: PassFailTable) -> list[str]:
    baseline_pass, baseline_fail = table.both_pass + table.pass_to_fail, table.fail_to_pass + table.both_fail
    rows = [
        ["baseline pass", table.both_pass, table.pass_to_fail, baseline_pass],
        ["baseline fail", table.fail_to_pass, table.both_fail, baseline_fail],
        ["total", table.both_pass + table.fail_to_pass, table.pass_to_fail + table.both_fail, table.rows],
    ]
    headers = ["", "candidate pass", "candidate fail", "total"]
    return _table(headers, [[str(cell) for cell in row] for row in rows], right={1, 2, 3})


def _key_metrics(comparison: KeyMetricsComparison) -> list[str]:
    lines = [
        "## Key metrics",
        "",
        f"- baseline: {_source(comparison.baseline_source.kind, comparison.baseline_source.detail)}",
        f"- candidate: {_source(comparison.candidate_source.kind, comparison.candidate_source.detail)}",
        "",
    ]
    if not comparison.agents:
        return [*lines, "No key metrics on either side.", ""]
    for agent in comparison.agents:
        lines += [f"### {agent.agent} (baseline {agent.baseline_rows} rows, candidate {agent.candidate_rows} rows)", ""]
        rows = [
            [change.metric, _number(change.baseline), _number(change.candidate), _number(change.delta, signed=True)]
            for change in agent.changes
        ]
        lines += [*_table(["key metric", "baseline", "candidate", "Δ"], rows, right={1, 2, 3}), ""]
    return lines


def _breakdown(breakdown: Breakdown) -> list[str]:
    field = _cell(breakdown.field)
    counts, figures = [], []
    for group in breakdown.groups:
        binary, delta = group.figures.binary, group.figures.delta
        table = binary.table if binary is not None else None
        counts.append(
            [
                _cell(group.value),
                str(group.baseline_rows),
                str(group.candidate_rows),
                str(group.only_baseline),
                str(group.only_candidate),
                str(group.masked),
                str(group.figures.rows),
                NONE if table is None else str(table.pass_to_fail),
                NONE if table is None else str(table.fail_to_pass),
            ]
        )
        figures.append(
            [
                _cell(group.value),
                NONE if binary is None else _percent(binary.flip_rate),
                NONE if binary is None else f"{binary.net_change:+d}",
                NONE if binary is None else _p_value(binary.mcnemar_p),
                NONE if binary is None else _kappa(binary.kappa.value),
                NONE if delta is None else f"{delta.mean_delta:+.4f}",
                NONE if delta is None else f"[{delta.interval.low:+.4f}, {delta.interval.high:+.4f}]",
                NONE if delta is None else f"{delta.mean_abs_delta:.4f}",
            ]
        )
    count_headers = [field, "baseline", "candidate", "only b", "only c", "masked", "compared", "pass→fail", "fail→pass"]
    figure_headers = [field, "flip rate", "net", "McNemar p", "κ", "mean Δ", "95 % CI", "mean abs Δ"]
    return [
        f"## By {field}",
        "",
        *_table(count_headers, counts, right=set(range(1, 9))),
        "",
        *_table(figure_headers, figures, right=set(range(1, 8))),
        "",
    ]


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: set[int]) -> list[str]:
    widths = [max(len(cell) for cell in column) for column in zip(headers, *rows, strict=True)]

    def line(cells: Sequence[str]) -> str:
        padded = (
            cell.rjust(w) if i in right else cell.ljust(w)
            for i, (cell, w) in enumerate(zip(cells, widths, strict=True))
        )
        return "| " + " | ".join(padded) + " |"

    rule = "|" + "|".join("-" * (w + 1) + ":" if i in right else ":" + "-" * (w + 1) for i, w in enumerate(widths))
    return [line(headers), rule + "|", *(line(row) for row in rows)]


def _source(kind: str, detail: str) -> str:
    return f"from `{detail}`" if kind == "file" else detail


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _percent(value: float, *, signed: bool = False) -> str:
    return f"{value * 100:+.1f} %" if signed else f"{value * 100:.1f} %"


def _p_value(p: float) -> str:
    return f"{p:.3f}" if p >= 0.001 else f"{p:.1e}"


def _kappa(value: float | None) -> str:
    return "undefined" if value is None else f"{value:.3f}"


def _number(value: float | None, *, signed: bool = False) -> str:
    if value is None:
        return NONE
    return f"{value:+.4f}" if signed else f"{value:.4f}"
