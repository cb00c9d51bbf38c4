"""``reverify run``: check everything up front, then materialize the rescoring assets.

The start-up runs several things at once: the built-in servers and the two key scans start in their own
processes, and the join and the inputs' fingerprints run in threads (polars and xxhash, without the GIL), while
another thread imports Dagster. Their errors are raised as soon as they are found, before the Dagster run is
created, as the other input errors are.
"""

from __future__ import annotations

import argparse
import logging
from contextlib import ExitStack

from reverify_assets.budget.prices import judge_prices
from reverify_assets.cli.flags import parsed_options
from reverify_assets.config.override_paths import JUDGE_PRICES_KEY
from reverify_assets.defs.instance import ensure_dagster_home
from reverify_assets.errors import InputError, OutputError, UsageError, WriteError
from reverify_assets.files.names import RunFiles, output_partition_key, source_failures_path, unsafe_path
from reverify_assets.files.output_lock import HeldOutputs
from reverify_assets.files.preflight import check_source_file
from reverify_assets.keys.rollout_identity import ALLOW_KEY, allows_prompt_mismatch
from reverify_assets.keys.rollout_mismatch import first_rows_disagree
from reverify_assets.processes.prefetch import PrefetchedWork, start_import
from reverify_assets.resume.output_policy import check_fresh_output, check_sources_kept
from reverify_assets.resume.settled_keys import max_attempts_from
from reverify_assets.run.options import RunOptions
from reverify_assets.run.preparation import VerifierSetup, load_verifier_setup, rollouts_scan_limit
from reverify_assets.run.startup_handoff import StartupHandoff
from reverify_assets.run.startup_prefetch import PrefetchedInputs
from reverify_assets.verifier.launcher import prestarted_servers

log = logging.getLogger("reverify")
TWO_SOURCES_WARNING = (
    "WARNING: --judge-failed-only merges two sources: the successes in {rollouts} keep the rewards the original "
    "run gave them, the recovered rows get rewards computed now. Keep the verifier and judge config identical "
    "to the original run's, or the merged metrics mix two graders."
)


def run_options(args: argparse.Namespace, overrides: list[str]) -> RunOptions:
    options = parsed_options(args, RunOptions, overrides=overrides)
    options.check_flags()
    return options


def check_before_start(options: RunOptions) -> None:
    """Everything a user can get wrong about files, before any server starts or any file is written."""
    for flag, path in (("--inputs", options.inputs_file), ("--rollouts", options.rollouts_file)):
        check_source_file(flag, path)
    if options.judge_failed_only:
        if not (failures := source_failures_path(options.rollouts_file)).exists():
            raise InputError(
                f"--judge-failed-only reads the judge failures from {failures}, which does not exist "
                "(it is the failures sidecar written next to --rollouts by the original run)",
                path=failures,
            )
        check_source_file("--judge-failed-only's failures sidecar", failures)
    check_sources_kept(
        options.inputs_file, options.rollouts_file, options.output_file, force=options.force, append=options.append
    )
    output_partition_key(options.output_file)
    if options.resume or options.append:
        return
    check_fresh_output(RunFiles.for_output(options.output_file), overwrite=options.overwrite)
    if options.force and not options.judge_failed_only:
        check_fresh_output(RunFiles.for_output(options.output_file, unsafe=True), overwrite=options.overwrite)


def run_command(args: argparse.Namespace, overrides: list[str]) -> None:
    options = run_options(args, overrides)
    if options.allow_prompt_mismatch:  # the config knob it stands for, which the run config keeps for a re-execution
        options.overrides.append(f"++{ALLOW_KEY}=true")
    setup = load_verifier_setup(options.config_files, options.overrides).for_run(
        no_judge_cache=options.no_judge_cache, recovery=options.judge_failed_only
    )
    if setup.config.get("force") is True:  # NeMo Gym's own spelling of the flag: ++force=true
        options.force = True
    check_before_start(options)
    if options.max_cost is not None and judge_prices(setup.config) is None:
        raise UsageError(
            f"--max-cost needs the judge's prices: a top-level `{JUDGE_PRICES_KEY}:` block in the config "
            "(input_per_million_tokens, and output_per_million_tokens)"
        )
    max_attempts_from(options.max_attempts)  # a bad NEMO_GYM_MAX_ROLLOUT_ATTEMPTS is a config error, said now
    if options.dry_run:
        from reverify_assets.cli.dry_run import dry_run

        dry_run(options, setup)
        return
    if options.judge_failed_only:
        log.warning(TWO_SOURCES_WARNING.format(rollouts=options.rollouts_file))
    # From before anything starts to the last file written: another run's --overwrite is refused while this one
    # runs, not only while its verify step does.
    outputs = [
        options.output_file,
        *([unsafe_path(options.output_file)] if options.force else []),
    ]  # --force: unsafe_ names
    held = HeldOutputs()
    with ExitStack() as holding:
        for output in outputs:
            holding.enter_context(held.hold(output))
        try:
            _start_and_materialize(options, setup, held)
        except WriteError as exc:
            raise OutputError(
                f"{exc}. The files hold whole rows only, and a metrics file is written whole or not at all: once "
                f"{exc.path.parent} can take them (free some space, or make it writable), run the same command "
                "with --resume to finish.",
                path=exc.path,
            ) from exc


def _start_and_materialize(options: RunOptions, setup: VerifierSetup, held: HeldOutputs) -> None:
    limit = rollouts_scan_limit(options.limit, options.judge_failed_only)
    join_with = None if options.judge_failed_only else setup
    # Next to the runs' work folders (DAGSTER_HOME/reverify_work), so that moving the inputs index written during
    # the start-up into its run's folder is one rename (a copy if the instance keeps its files elsewhere).
    index_folder = ensure_dagster_home() / "reverify_work"
    index_folder.mkdir(exist_ok=True)
    work = PrefetchedWork()
    prefetched = PrefetchedInputs(
        options.inputs_file,
        options.rollouts_file,
        limit=limit,
        join_with=join_with,
        work=work,
        index_folder=index_folder,
        require_response=not options.judge_failed_only,  # recovery carries the successes over as they are
    )
    # Rollouts of another dataset are refused before a server starts: when the first rows already disagree, none
    # is started ahead, and the join's error (with its count of mismatches) ends the start-up.
    other_dataset = join_with is not None and not allows_prompt_mismatch(setup.config)
    other_dataset = other_dataset and first_rows_disagree(options.inputs_file, options.rollouts_file, options.limit)
    blocks = [] if other_dataset else list(setup.topology.servers.values())
    with prestarted_servers(blocks, setup.config, judge_cache=setup.judge_cache) as servers, prefetched:
        # Dagster's import is most of the start-up: it runs in a thread while this one watches the scans, so that
        # an input error is said as soon as it is found.
        prefetched.wait_for(start_import("reverify_assets.defs.materialization"))
        from reverify_assets.cli.summary import print_run_summary
        from reverify_assets.defs.materialization import materialize_rescoring
        from reverify_assets.defs.resources import RescoringResource
        from reverify_assets.defs.run_tags import COMMAND_TAG, CONFIG_TAG, OUTPUT_TAG

        rescoring = RescoringResource.for_run(options)
        log.info("reverify: verifier config %s; rows stream from %s", setup.config_hash, options.rollouts_file)
        run = materialize_rescoring(
            rescoring,
            aggregate=not options.disable_aggregation,
            tags={OUTPUT_TAG: str(options.output_file), CONFIG_TAG: setup.config_hash, COMMAND_TAG: "run"},
            before_run=prefetched.wait,
            startup=StartupHandoff(work, servers, given_overrides=list(options.overrides), held_outputs=held),
        )
    print_run_summary(
        run,
        recovery=options.judge_failed_only,
        disable_aggregation=options.disable_aggregation,
        judge_cache=setup.judge_cache,
    )
