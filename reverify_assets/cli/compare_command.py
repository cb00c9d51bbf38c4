"""``reverify compare BASELINE CANDIDATE``: a paired comparison of two scorings of the same rollouts."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel

from reverify_assets.cli.flags import parsed_options
from reverify_assets.errors import UsageError
from reverify_assets.run.options import flag

if TYPE_CHECKING:
    from reverify_assets.compare.key_metrics import HookChoice

FLIPS_SUFFIX = "_flips"
# Enough resamples that another seed moves the interval's ends by a few hundredths of its width; each costs
# one draw per task, so `--resamples` trades that for speed on large runs.
DEFAULT_RESAMPLES = 10_000
DEFAULT_SEED = 0


class CompareOptions(BaseModel):
    baseline: str = flag("a reverified output, or the original rollouts.jsonl", positional=True)
    candidate: str = flag("a reverified output of the same rollouts", positional=True)
    output: str | None = flag("write the report as JSON here", None, short="-o")
    markdown: str | None = flag("write the report as markdown here", None)
    flips: str | None = flag(
        "write the rows whose reward changed as JSONL (default: <--output stem>_flips.jsonl)", None
    )
    by: list[str] = flag("also break down by a row field (a.b; repeatable)", [], metavar="FIELD")
    config_paths: list[str] = flag(
        "verifier config YAML (repeatable): its servers' metric hooks give the key metrics of a side "
        "without a metrics file (default: NeMo Gym's default metrics)",
        [],
        option="--config",
        metavar="CONFIG",
    )
    allow_mixed_configs: bool = flag("compare a side scored by several verifier configs", False)
    allow_prompt_mismatch: bool = flag(
        "compare keys whose two rows hold different prompts (an agent that rewrites its prompt)", False
    )
    noise: str | None = flag(
        "a `reverify noise` report: how many changes exceed what noise alone gives", None, metavar="REPORT"
    )
    seed: int = flag(f"bootstrap seed (default {DEFAULT_SEED})", DEFAULT_SEED)
    resamples: int = flag(f"bootstrap resamples (default {DEFAULT_RESAMPLES})", DEFAULT_RESAMPLES)


def compare_command(args: argparse.Namespace, overrides: list[str]) -> None:
    # Imported here: every `reverify` command builds this parser, and the statistics cost a second to import.
    from reverify_assets.compare.bootstrap import BootstrapSettings
    from reverify_assets.compare.comparison import CompareRequest, run_comparison
    from reverify_assets.compare.markdown import render_markdown
    from reverify_assets.files.jsonl import AtomicWriter, write_json_atomic
    from reverify_assets.probe.noise_report import read_noise_report, with_noise_floor

    options = parsed_options(args, CompareOptions)
    if options.resamples < 1:
        raise UsageError(f"--resamples must be a positive number, got {options.resamples}")
    if overrides and not options.config_paths:
        raise UsageError(f"overrides {overrides} need a --config to apply to")
    baseline, candidate = Path(options.baseline), Path(options.candidate)
    output = Path(options.output) if options.output else None
    markdown = Path(options.markdown) if options.markdown else None
    flips = Path(options.flips) if options.flips else _default_flips(output)
    noise_path = Path(options.noise) if options.noise else None
    _refuse_to_overwrite_inputs([baseline, candidate, *([noise_path] if noise_path else [])], [output, markdown, flips])
    request = CompareRequest(
        baseline=baseline,
        candidate=candidate,
        by=options.by,
        hooks=_hook_choice(options.config_paths, overrides),
        allow_mixed_configs=options.allow_mixed_configs,
        allow_prompt_mismatch=options.allow_prompt_mismatch,
        bootstrap=BootstrapSettings(resamples=options.resamples, seed=options.seed),
        flips=flips,
    )
    noise = read_noise_report(noise_path) if noise_path else None  # a bad report is said before the work
    report = run_comparison(request)
    if noise is not None and noise_path is not None:
        report = with_noise_floor(report, noise, noise_path)
    text = render_markdown(report)
    if output is not None:
        write_json_atomic(output, report.model_dump(mode="json"))
    if markdown is not None:
        with AtomicWriter(markdown) as fh:
            fh.write(text.encode() + b"\n")
    print(text)


def _default_flips(output: Path | None) -> Path | None:
    return None if output is None else output.with_name(f"{output.stem}{FLIPS_SUFFIX}.jsonl")


def _hook_choice(configs: list[str], overrides: list[str]) -> HookChoice:
    from reverify_assets.compare.key_metrics import HookChoice
    from reverify_assets.config.loading import load_config
    from reverify_assets.config.topology import read_topology

    if not configs:
        return HookChoice(None)
    loaded = load_config([Path(c) for c in configs], overrides)
    return HookChoice(read_topology(loaded.values, loaded.sources), ", ".join(configs))


def _refuse_to_overwrite_inputs(inputs: list[Path], outputs: list[Path | None]) -> None:
    sources = {path.resolve(): path for path in inputs}
    for target in outputs:
        if target is not None and target.resolve() in sources:
            raise UsageError(f"{target} is an input of the comparison: write the report elsewhere")
