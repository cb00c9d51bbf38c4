"""``reverify compare BASELINE CANDIDATE``: a paired comparison of two scorings of the same rollouts."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reverify_assets.errors import UsageError

if TYPE_CHECKING:
    from reverify_assets.compare.key_metrics import HookChoice

FLIPS_SUFFIX = "_flips"
# Enough resamples that another seed moves the interval's ends by a few hundredths of its width; each costs
# one draw per task, so `--resamples` trades that for speed on large runs.
DEFAULT_RESAMPLES = 10_000
DEFAULT_SEED = 0


def add_compare_parser(commands: Any) -> None:
    compare = commands.add_parser("compare", help="compare two scorings of the same rollouts, row by row")
    compare.add_argument("baseline", help="a reverified output, or the original rollouts.jsonl")
    compare.add_argument("candidate", help="a reverified output of the same rollouts")
    compare.add_argument("--output", "-o", help="write the report as JSON here")
    compare.add_argument("--markdown", help="write the report as markdown here")
    compare.add_argument(
        "--flips", help="write the rows whose reward changed as JSONL (default: <--output stem>_flips.jsonl)"
    )
    compare.add_argument(
        "--by", action="append", default=[], metavar="FIELD", help="also break down by a row field (a.b; repeatable)"
    )
    compare.add_argument(
        "--config",
        action="append",
        help="verifier config YAML (repeatable): its servers' metric hooks give the key metrics of a side "
        "without a metrics file (default: NeMo Gym's default metrics)",
    )
    compare.add_argument(
        "--allow-mixed-configs", action="store_true", help="compare a side scored by several verifier configs"
    )
    compare.add_argument(
        "--allow-prompt-mismatch",
        action="store_true",
        help="compare keys whose two rows hold different prompts (an agent that rewrites its prompt)",
    )
    compare.add_argument(
        "--noise", metavar="REPORT", help="a `reverify noise` report: how many changes exceed what noise alone gives"
    )
    compare.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"bootstrap seed (default {DEFAULT_SEED})")
    compare.add_argument(
        "--resamples", type=int, default=DEFAULT_RESAMPLES, help=f"bootstrap resamples (default {DEFAULT_RESAMPLES})"
    )


def compare_command(args: argparse.Namespace, overrides: list[str]) -> None:
    # Imported here: every `reverify` command builds this parser, and the statistics cost a second to import.
    from reverify_assets.compare.bootstrap import BootstrapSettings
    from reverify_assets.compare.comparison import CompareRequest, run_comparison
    from reverify_assets.compare.markdown import render_markdown
    from reverify_assets.files.jsonl import AtomicWriter, write_json_atomic
    from reverify_assets.probe.noise_report import read_noise_report, with_noise_floor

    if args.resamples < 1:
        raise UsageError(f"--resamples must be a positive number, got {args.resamples}")
    if overrides and not args.config:
        raise UsageError(f"overrides {overrides} need a --config to apply to")
    baseline, candidate = Path(args.baseline), Path(args.candidate)
    output = Path(args.output) if args.output else None
    markdown = Path(args.markdown) if args.markdown else None
    flips = Path(args.flips) if args.flips else _default_flips(output)
    noise_path = Path(args.noise) if args.noise else None
    _refuse_to_overwrite_inputs([baseline, candidate, *([noise_path] if noise_path else [])], [output, markdown, flips])
    request = CompareRequest(
        baseline=baseline,
        candidate=candidate,
        by=args.by,
        hooks=_hook_choice(args.config, overrides),
        allow_mixed_configs=args.allow_mixed_configs,
        allow_prompt_mismatch=args.allow_prompt_mismatch,
        bootstrap=BootstrapSettings(resamples=args.resamples, seed=args.seed),
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


def _hook_choice(configs: list[str] | None, overrides: list[str]) -> HookChoice:
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
