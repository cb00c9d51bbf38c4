"""A rescoring's probe: ``reverify probe`` on its first source."""

from __future__ import annotations

import tempfile
from pathlib import Path

from reverify_assets.errors import StateError
from reverify_assets.files.dagster_home import DEFAULT_PROBE_SAMPLE, probe_report_path
from reverify_assets.files.jsonl import write_json_atomic
from reverify_assets.probe.report import ProbeReport
from reverify_assets.probe.two_passes import run_probe
from reverify_assets.rescoring.sources import discover_sources
from reverify_assets.rescoring.spec import RescoringSpec
from reverify_assets.run.preparation import VerifierSetup


def probe_first_source(spec: RescoringSpec, setup: VerifierSetup) -> tuple[ProbeReport, Path]:
    """The report, also kept where ``reverify run --force`` of the same config finds it, and its path."""
    sources = discover_sources(spec)
    if not sources:
        raise StateError(f"rescoring {spec.name!r} has no source to probe yet")
    source = sources[0]
    kept = probe_report_path(setup.config_hash)
    kept.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".reverify-probe-", dir=kept.parent) as work:
        report = run_probe(
            setup, source.inputs, source.rollouts, size=DEFAULT_PROBE_SAMPLE, seed=0, concurrency=64, work=Path(work)
        )
    write_json_atomic(kept, report.model_dump(mode="json"))
    return report, kept
