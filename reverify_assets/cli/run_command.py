"""``reverify run``: check everything up front, then materialize the rescoring assets."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from pydantic import ValidationError

from reverify_assets.errors import ReverifyError, UsageError
from reverify_assets.lib.file_names import RunFiles
from reverify_assets.pipeline.options import DEFAULT_CONCURRENCY, RunOptions
from reverify_assets.pipeline.output_files import check_fresh_output
from reverify_assets.pipeline.preparation import load_verifier_setup

log = logging.getLogger("reverify")


def run_options(args: argparse.Namespace, overrides: list[str]) -> RunOptions:
    try:
        options = RunOptions(
            config_paths=[Path(p) for p in args.config],
            overrides=overrides,
            inputs=Path(args.inputs),
            rollouts=Path(args.rollouts),
            output=Path(args.output),
            force=args.force,
            overwrite=args.overwrite,
            disable_aggregation=args.disable_aggregation,
            limit=args.limit,
            concurrency=args.concurrency or DEFAULT_CONCURRENCY,
        )
    except ValidationError as exc:
        raise UsageError(str(exc)) from exc
    options.check_flags()
    return options


def run_command(args: argparse.Namespace, overrides: list[str]) -> None:
    options = run_options(args, overrides)
    setup = load_verifier_setup(options.config_paths, options.overrides)
    if setup.config.get("force") is True:  # NeMo Gym's own spelling of the flag: ++force=true
        options.force = True
    for flag, path in (("--inputs", options.inputs), ("--rollouts", options.rollouts)):
        if not path.is_file():
            raise ReverifyError(f"{flag} file not found: {path}")
    check_fresh_output(RunFiles.for_output(options.output), overwrite=options.overwrite)
    if options.force:
        check_fresh_output(RunFiles.for_output(options.output, unsafe=True), overwrite=options.overwrite)

    from reverify_assets.cli.summary import print_run_summary
    from reverify_assets.defs.materialization import materialize_rescoring
    from reverify_assets.defs.resources import RescoringResource

    rescoring = RescoringResource(
        config_paths=[str(p.resolve()) for p in options.config_paths],
        overrides=options.overrides,
        inputs=str(options.inputs.resolve()),
        rollouts=str(options.rollouts.resolve()),
        output=str(options.output.resolve()),
        force=options.force,
        overwrite=options.overwrite,
        limit=options.limit,
        concurrency=options.concurrency,
    )
    log.info("reverify: verifier config %s; rows stream from %s", setup.config_hash, options.rollouts)
    run = materialize_rescoring(
        rescoring,
        aggregate=not options.disable_aggregation,
        tags={"reverify/output": str(options.output), "reverify/config_hash": setup.config_hash},
    )
    print_run_summary(run, disable_aggregation=options.disable_aggregation)
