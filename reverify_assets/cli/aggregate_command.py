"""``reverify aggregate``: shards merged in key order, then the same metrics as the unsharded run
(``run.shard_aggregation``), as a run of the code location's job ``reverify_aggregate``.

The glob, the output and the config are checked before Dagster is imported: a mistake there leaves no failed
run behind. The shards are indexed in a thread while Dagster imports, and the run takes the index.

The health-check flags are ``gym eval aggregate``'s, and set its config keys as its flags do
(``gym.rollout_health``): the run's config, which the UI re-executes, holds them.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from reverify_assets.cli.flags import parsed_options
from reverify_assets.cli.summary import print_coverage, print_metrics_computed
from reverify_assets.errors import UsageError
from reverify_assets.files.output_lock import HeldOutputs
from reverify_assets.gym.rollout_health import health_settings, known_check_ids
from reverify_assets.processes.prefetch import PrefetchedWork
from reverify_assets.run.options import AggregateOptions
from reverify_assets.run.preparation import load_verifier_setup
from reverify_assets.run.shard_aggregation import check_output_name, shard_files, start_shard_index
from reverify_assets.run.startup_handoff import StartupHandoff


def absolute_globs(input_glob: str) -> str:
    """Each comma-separated pattern made absolute: the run config must name the same files from anywhere."""
    return ",".join(str(Path(pattern.strip()).absolute()) for pattern in input_glob.split(",") if pattern.strip())


def health_check_overrides(options: AggregateOptions) -> list[str]:
    """The health-check flags as the overrides of NeMo Gym's config keys they stand for."""
    overrides = ["++disable_health_check=true"] if options.no_health_check else []
    if (workers := options.health_check_workers) is not None:
        if workers < 1:
            raise UsageError(f"--health-check-workers must be at least 1, got {workers}")
        overrides.append(f"++health_check_workers={workers}")
    if options.health_check_ignore is not None:
        try:
            ignored = known_check_ids(options.health_check_ignore)
        except ValueError as exc:
            raise UsageError(f"--health-check-ignore: {exc}") from exc
        overrides.append(f"++health_check_ignored_checks=[{','.join(ignored)}]")
    return overrides


def aggregate_command(args: argparse.Namespace, overrides: list[str]) -> None:
    options = parsed_options(args, AggregateOptions)
    output = Path(options.output)
    check_output_name(output)
    overrides = [*overrides, *health_check_overrides(options)]
    setup = load_verifier_setup(options.config_files, overrides)
    health_settings(setup.config)
    # Held from here to the end, so that a second writer is refused before it starts a run that would fail.
    held = HeldOutputs()
    with held.hold(output):
        work = PrefetchedWork()
        start_shard_index(work, shard_files(options.input_glob, output))
        from reverify_assets.defs.resources import ShardAggregateResource
        from reverify_assets.defs.run_tags import COMMAND_TAG, CONFIG_TAG, OUTPUT_TAG
        from reverify_assets.defs.shard_aggregate_defs import aggregate_in_process

        resource = ShardAggregateResource(
            input_glob=absolute_globs(options.input_glob),
            output=str(output.resolve()),
            allow_mixed_configs=options.allow_mixed_configs,
            **ShardAggregateResource.config_values(options.config_files, overrides),
        )
        tags = {COMMAND_TAG: "aggregate", OUTPUT_TAG: str(output), CONFIG_TAG: setup.config_hash}
        run_id, made = aggregate_in_process(
            resource, tags, StartupHandoff(work, given_overrides=overrides, held_outputs=held)
        )
    if made.merged:
        print(f"Merged:  {made.output} ({made.rows} rows, sorted by key)")
    if made.metrics is None:
        print("No row carries an agent name: no metrics written.")
    else:
        print(f"Metrics: {made.metrics}")
        print_metrics_computed(made.computed_by)
        print_coverage(made.coverage, made.provenance)
        for agent, key_metrics in made.key_metrics.items():
            print(f"  {agent}: {key_metrics}")
    for line in made.health:
        print(line)
    print(f"Dagster run: {run_id}")
