"""``reverify shards|status|backfill|ui``: the rescorings of ``configs/rescorings`` from the command line."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from reverify_assets.errors import UsageError

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


def rescoring_command(args: argparse.Namespace) -> None:
    if args.command == "ui":
        from reverify_assets.cli.ui_command import ui_command

        ui_command(Path(args.project), args.port)
        return
    from reverify_assets.cli import rescoring_runs
    from reverify_assets.defs.comparison_defs import build_comparison
    from reverify_assets.defs.rescoring_defs import build_rescoring
    from reverify_assets.rescoring.spec import find_rescoring

    spec = find_rescoring(Path(args.project).resolve(), args.rescoring)
    unknown = sorted(set(args.variant or []) - set(spec.variants))
    if unknown:
        raise UsageError(f"rescoring {spec.name!r} has no variant {unknown} (its variants: {sorted(spec.variants)})")
    every_variant = [build_rescoring(spec, v) for v in spec.variant_names]
    variants = [r for r in every_variant if not args.variant or r.variant in args.variant]
    if args.command == "shards":
        rescoring_runs.register_shards(variants[0])
    elif args.command == "status":
        for rescoring in variants:
            rescoring_runs.print_status(rescoring)
    else:
        from reverify_assets.rescoring.status import ShardState

        states = [ShardState(flag) for flag in STATE_FLAGS if getattr(args, flag)] or [
            ShardState(f) for f in STATE_FLAGS
        ]
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

            follow_to_end(variants, args.follow, ui_url=args.ui_url)
            return
        if args.submit:
            from reverify_assets.cli.backfill_submit import submit

            submit(
                variants,
                states,
                aggregate=not args.no_aggregate,
                ui_url=args.ui_url,
                worker_wait_s=args.worker_wait,
            )
            return
        rescoring_runs.backfill(
            variants,
            states,
            aggregate=not args.no_aggregate,
            parallel=args.parallel,
            ui_url=args.ui_url,
            comparison=build_comparison(every_variant),
        )
