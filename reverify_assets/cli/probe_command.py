"""``reverify probe``: evidence for or against re-scoring stored rollouts with a config (``probe.two_passes``).

The report is kept in the Dagster home under the config's hash (``files.dagster_home``), where a later ``reverify
run --force`` of the same config finds it and prints its verdict; ``--output`` writes a copy too.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from reverify_assets.cli.flags import parsed_options
from reverify_assets.cli.sample_flags import SampleFlags, report_path, sample_flag
from reverify_assets.files.dagster_home import DEFAULT_PROBE_SAMPLE
from reverify_assets.run.options import flag

if TYPE_CHECKING:
    from reverify_assets.probe.report import PairAgreement, ProbeReport


class ProbeOptions(SampleFlags):
    sample: int = sample_flag(DEFAULT_PROBE_SAMPLE)
    output: str | None = flag("also write the report here (.json)", None, short="-o")


def probe_command(args: argparse.Namespace, overrides: list[str]) -> None:
    from reverify_assets.files.jsonl import write_json_atomic
    from reverify_assets.probe.two_passes import run_probe
    from reverify_assets.run.preparation import load_verifier_setup

    options = parsed_options(args, ProbeOptions)
    inputs, rollouts = options.checked_sources()
    output = report_path(options.output, inputs, rollouts) if options.output else None
    setup = load_verifier_setup(options.config_files, overrides)
    report, kept = run_probe(
        setup, inputs, rollouts, size=options.sample, seed=options.seed, concurrency=options.concurrency
    )
    if output is not None:
        write_json_atomic(output, report.model_dump(mode="json"))
    print_probe(report, kept)


def print_probe(report: ProbeReport, kept: Path) -> None:
    agents = ", ".join(f"{rows} {agent}" for agent, rows in report.rows_by_agent.items())
    modes = ", ".join(f"{name}: {mode}" for name, mode in sorted(report.reverify_modes.items()))
    print(f"Probe of verifier config {report.verifier_config_hash} ({modes}): {report.sampled_rows} rows ({agents})")
    print(f"  between the two passes: {_agreement(report.between_passes)}")
    print(f"  with the stored rewards: {_agreement(report.with_stored)}")
    if report.stored_missing:
        print(f"  ({report.stored_missing} rows stored no reward to compare with)")
    if any(report.failures_by_pass):
        first, second = report.failures_by_pass
        print(f"  rows that failed: {first} in the first pass, {second} in the second")
    for title, keys in (("passes", report.pass_disagreements), ("stored", report.stored_disagreements)):
        if keys:
            shown = ", ".join(f"({key.task}, {key.rollout}) {key.first:g}→{key.second:g}" for key in keys[:5])
            more = f" and {len(keys) - 5} more" if len(keys) > 5 else ""
            print(f"  disagreeing keys ({title}): {shown}{more}")
    print(f"Verdict: {report.verdict}")
    print(f"Report: {kept}")


def _agreement(agreement: PairAgreement) -> str:
    if not agreement.rows:
        return "no rows"
    if agreement.kappa is None:
        kappa = agreement.kappa_omitted
    elif agreement.kappa.value is None:
        kappa = "κ undefined (one outcome only)"
    else:
        kappa = f"κ {agreement.kappa.value:.3f}"
    return f"{agreement.agree} of {agreement.rows} rows agree ({(agreement.rate or 0):.1%}), {kappa}"
