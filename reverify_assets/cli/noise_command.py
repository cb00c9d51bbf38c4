"""``reverify noise``: a verifier config's noise floor, the same sample scored K times (``probe.repeated_scoring``).

The judge-call cache is off for the command: a cached verdict would be the same sample again, not another.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from reverify_assets.cli.flags import parsed_options
from reverify_assets.cli.sample_flags import SampleFlags, report_path, sample_flag
from reverify_assets.errors import InputError, UsageError
from reverify_assets.run.options import flag

if TYPE_CHECKING:
    from reverify_assets.probe.noise_report import NoiseReport

DEFAULT_SAMPLE = 200
DEFAULT_REPEATS = 5
MIN_ROWS = 2


class NoiseOptions(SampleFlags):
    sample: int = sample_flag(DEFAULT_SAMPLE)
    output: str = flag("the report (.json), for `reverify compare --noise`", short="-o")
    repeats: int = flag(f"scorings of each row (default {DEFAULT_REPEATS})", DEFAULT_REPEATS)
    force: bool = flag("score with servers not declared stateless", False)


def noise_command(args: argparse.Namespace, overrides: list[str]) -> None:
    from reverify_assets.compare.agreement import self_agreement
    from reverify_assets.files.jsonl import write_json_atomic
    from reverify_assets.keys.rollout_identity import allows_prompt_mismatch
    from reverify_assets.probe.noise_report import NoiseReport, ScoredRow
    from reverify_assets.probe.repeated_scoring import sample_plan, score_repeatedly
    from reverify_assets.run.preparation import index_inputs, index_rollouts, join_and_route, load_verifier_setup

    options = parsed_options(args, NoiseOptions)
    if options.repeats < 2:
        raise UsageError(f"--repeats must be at least 2, got {options.repeats}")
    inputs, rollouts = options.checked_sources()
    output = report_path(options.output, inputs, rollouts)
    setup = load_verifier_setup(options.config_files, overrides)
    plan = join_and_route(
        index_inputs(inputs),
        index_rollouts(rollouts),
        setup.topology,
        check_prompts=not allows_prompt_mismatch(setup.config),
    )
    sample = sample_plan(plan, options.sample, options.seed)
    output.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".reverify-noise-", dir=output.parent) as work:
        scorings = score_repeatedly(
            setup,
            inputs,
            rollouts,
            sample,
            repeats=options.repeats,
            work=Path(work),
            seed=options.seed,
            concurrency=options.concurrency,
            force=options.force,
        )
    common = sorted(set.intersection(*(set(scoring.rewards) for scoring in scorings)))
    if len(common) < MIN_ROWS:
        failed = ", ".join(str(scoring.failed) for scoring in scorings)
        raise InputError(
            f"{len(common)} rows were scored in all {options.repeats} scorings, fewer than the {MIN_ROWS} a noise "
            f"floor needs for its own standard error (failures per scoring: {failed}); draw a larger --sample",
            path=rollouts,
        )
    ratings = [[scoring.rewards[key] for scoring in scorings] for key in common]
    agreement = self_agreement(ratings)
    report = NoiseReport(
        verifier_config_hash=setup.config_hash,
        inputs=str(inputs),
        rollouts=str(rollouts),
        seed=options.seed,
        sampled_rows=sample.height,
        scorings=options.repeats,
        rows_scored_every_time=len(common),
        failures_by_scoring=[scoring.failed for scoring in scorings],
        agreement=agreement,
        rows=[
            ScoredRow(task=key[0], rollout=key[1], rewards=rewards)
            for key, rewards in zip(common, ratings, strict=True)
        ],
    )
    write_json_atomic(output, report.model_dump(mode="json"))
    print_noise(report, output)


def print_noise(report: NoiseReport, output: Path) -> None:
    agreement = report.agreement
    left_out = report.sampled_rows - report.rows_scored_every_time
    print(
        f"Noise floor of verifier config {report.verifier_config_hash}: {report.rows_scored_every_time} rows scored "
        f"{report.scorings} times each, by servers started afresh each time (judge-call cache off)"
    )
    if left_out:
        print(f"  {left_out} sampled rows left out: they failed in at least one scoring")
    share = agreement.unstable_rows / agreement.rows
    print(f"  unstable rows: {agreement.unstable_rows} ({share:.1%}): their scorings did not all agree")
    print(
        f"  noise flip rate: {agreement.noise_flip_rate:.2%} ± {agreement.noise_flip_rate_se:.2%} (the chance that "
        "two scorings of a row disagree, and its standard error)"
    )
    if agreement.fleiss_kappa is None:
        print(f"  Fleiss' κ: undefined ({agreement.kappa_undefined_reason})")
    else:
        print(
            f"  Fleiss' κ: {agreement.fleiss_kappa:.3f} (agreement {agreement.mean_agreement:.3f}, "
            f"by chance {agreement.chance_agreement:.3f})"
        )
    print(f"Report: {output}")
