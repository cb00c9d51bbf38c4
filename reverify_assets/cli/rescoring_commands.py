"""``reverify shards|status|backfill|ui``: the rescorings of ``configs/rescorings`` from the command line."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reverify_assets.errors import UsageError

if TYPE_CHECKING:  # building the parser must not import Dagster
    from reverify_assets.defs.rescoring_defs import RescoringDefs

# The states `backfill` can target, by flag; ShardState values. Kept as strings so that building the parser
# does not import Dagster (a usage error must answer at once).
STATE_FLAGS = ("stale", "missing", "failed")


def add_rescoring_parsers(commands: Any) -> None:
    def rescoring_parser(name: str, help_text: str) -> argparse.ArgumentParser:
        parser = commands.add_parser(name, help=help_text)
        parser.add_argument("rescoring", help="a file name (without .yaml) in configs/rescorings/")
        parser.add_argument("--project", default=".", help="the project root holding configs/ (default: .)")
        parser.add_argument("--variant", action="append", help="only this verifier variant (repeatable)")
        return parser

    rescoring_parser("shards", "find the shards of a rescoring's rollout files and register them")
    rescoring_parser("status", "list shards materialized, stale (verifier changed), failed and missing")
    backfill = rescoring_parser("backfill", "re-score shards, one run each, then the aggregate")
    for flag in STATE_FLAGS:
        backfill.add_argument(f"--{flag}", action="store_true", help=f"the {flag} shards (default: all three)")
    backfill.add_argument("--no-aggregate", action="store_true", help="leave the aggregate metrics alone")
    backfill.add_argument(
        "--parallel",
        type=int,
        default=1,
        help="shard runs at a time on this machine, each in its own process: a Dagster backfill whose loop and run "
        "queue this command hosts (1: one after another, in this process)",
    )
    backfill.add_argument(
        "--submit",
        action="store_true",
        help="hand the backfill to the Dagster instance's daemon (its run queue, launcher and executor: Celery "
        "workers, say) instead of running the shards here; then follow it until it ends",
    )
    backfill.add_argument(
        "--follow", metavar="BACKFILL_ID", help="follow a backfill submitted before (Ctrl-C stops following only)"
    )
    backfill.add_argument(
        "--ui-url", default="http://127.0.0.1:3000", help="the Dagster UI's address, for the backfill's page"
    )
    backfill.add_argument(
        "--worker-wait",
        type=float,
        default=20.0,
        metavar="SECONDS",
        help="with --submit: how long to wait for the Dagster daemon and, on Celery, a worker on the steps' queue "
        "before giving up (20)",
    )
    ui = commands.add_parser("ui", help="start the Dagster UI on the CLI's DAGSTER_HOME")
    ui.add_argument("--project", default=".", help="the project root holding workspace.yaml (default: .)")
    ui.add_argument("--port", type=int, default=3000)


def ui_command(args: argparse.Namespace, overrides: list[str]) -> None:
    from reverify_assets.cli.ui_command import start_ui

    _refuse_overrides("ui", overrides)
    start_ui(Path(args.project), args.port)


def shards_command(args: argparse.Namespace, overrides: list[str]) -> None:
    from reverify_assets.cli import rescoring_runs

    _refuse_overrides("shards", overrides)
    rescoring_runs.register_shards(_chosen_variants(args).chosen[0])


def status_command(args: argparse.Namespace, overrides: list[str]) -> None:
    from reverify_assets.cli import rescoring_runs

    _refuse_overrides("status", overrides)
    for rescoring in _chosen_variants(args).chosen:
        rescoring_runs.print_status(rescoring)


def backfill_command(args: argparse.Namespace, overrides: list[str]) -> None:
    from reverify_assets.cli import rescoring_runs
    from reverify_assets.defs.comparison_defs import build_comparison
    from reverify_assets.rescoring.status import ShardState

    _refuse_overrides("backfill", overrides)
    variants = _chosen_variants(args)
    states = [ShardState(flag) for flag in STATE_FLAGS if getattr(args, flag)] or [ShardState(f) for f in STATE_FLAGS]
    if args.parallel < 1:
        raise UsageError(f"--parallel must be at least 1, got {args.parallel}")
    if (args.submit or args.follow) and args.parallel != 1:
        raise UsageError("--parallel is for shards run here; with --submit or --follow the instance runs them")
    if args.worker_wait < 0:
        raise UsageError(f"--worker-wait must not be negative, got {args.worker_wait:g}")
    if args.submit and args.follow:
        raise UsageError("--submit starts a new backfill, --follow watches one: give one of them")
    if args.follow:
        from reverify_assets.cli.backfill_submit import follow_to_end

        follow_to_end(variants.chosen, args.follow, ui_url=args.ui_url)
        return
    if args.submit:
        from reverify_assets.cli.backfill_submit import submit

        submit(
            variants.chosen,
            states,
            aggregate=not args.no_aggregate,
            ui_url=args.ui_url,
            worker_wait_s=args.worker_wait,
        )
        return
    rescoring_runs.backfill(
        variants.chosen,
        states,
        aggregate=not args.no_aggregate,
        parallel=args.parallel,
        ui_url=args.ui_url,
        comparison=build_comparison(variants.every),
    )


@dataclass(frozen=True)
class _Variants:
    every: list[RescoringDefs]
    chosen: list[RescoringDefs]  # those --variant names, else every one


def _chosen_variants(args: argparse.Namespace) -> _Variants:
    from reverify_assets.defs.rescoring_defs import build_rescoring
    from reverify_assets.rescoring.spec import find_rescoring

    spec = find_rescoring(Path(args.project).resolve(), args.rescoring)
    unknown = sorted(set(args.variant or []) - set(spec.variants))
    if unknown:
        raise UsageError(f"rescoring {spec.name!r} has no variant {unknown} (its variants: {sorted(spec.variants)})")
    every = [build_rescoring(spec, variant) for variant in spec.variant_names]
    return _Variants(every, [r for r in every if not args.variant or r.variant in args.variant])


def _refuse_overrides(command: str, overrides: list[str]) -> None:
    """A rescoring's verifier and its overrides are in its YAML file: an override here would change nothing."""
    if overrides:
        raise UsageError(
            f"reverify {command} takes no ++overrides ({' '.join(overrides)}): a rescoring's are in the "
            "`verifier: overrides:` of its file in configs/rescorings/"
        )
