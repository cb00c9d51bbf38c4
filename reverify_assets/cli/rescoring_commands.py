"""``reverify shards|status|backfill|ui``: the rescorings of ``configs/rescorings`` from the command line."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel

from reverify_assets.cli.flags import parsed_options
from reverify_assets.errors import UsageError
from reverify_assets.run.options import flag

if TYPE_CHECKING:  # building the parser must not import Dagster
    from reverify_assets.defs.rescoring_defs import RescoringDefs


class RescoringFlags(BaseModel):
    """The flags of ``shards`` and ``status``, and the first of ``backfill``'s."""

    rescoring: str = flag("a file name (without .yaml) in configs/rescorings/", positional=True)
    project: str = flag("the project root holding configs/ (default: .)", ".")
    variant: list[str] = flag("only this verifier variant (repeatable)", [])

    def chosen_variants(self) -> _Variants:
        from reverify_assets.defs.rescoring_defs import build_rescoring
        from reverify_assets.rescoring.spec import find_rescoring

        spec = find_rescoring(Path(self.project).resolve(), self.rescoring)
        unknown = sorted(set(self.variant) - set(spec.variants))
        if unknown:
            raise UsageError(
                f"rescoring {spec.name!r} has no variant {unknown} (its variants: {sorted(spec.variants)})"
            )
        every = [build_rescoring(spec, variant) for variant in spec.variant_names]
        return _Variants(every, [r for r in every if not self.variant or r.variant in self.variant])


class BackfillOptions(RescoringFlags):
    # The states to target are ShardState's values, as strings: building the parser must not import Dagster.
    stale: bool = flag("the stale shards (default: all three)", False)
    missing: bool = flag("the missing shards (default: all three)", False)
    failed: bool = flag("the failed shards (default: all three)", False)
    no_aggregate: bool = flag("leave the aggregate metrics alone", False)
    parallel: int = flag(
        "shard runs at a time on this machine, each in its own process: a Dagster backfill whose loop and run "
        "queue this command hosts (1: one after another, in this process)",
        1,
    )
    submit: bool = flag(
        "hand the backfill to the Dagster instance's daemon (its run queue, launcher and executor: Celery "
        "workers, say) instead of running the shards here; then follow it until it ends",
        False,
    )
    follow: str | None = flag(
        "follow a backfill submitted before (Ctrl-C stops following only)", None, metavar="BACKFILL_ID"
    )
    ui_url: str = flag("the Dagster UI's address, for the backfill's page", "http://127.0.0.1:3000")
    worker_wait: float = flag(
        "with --submit: how long to wait for the Dagster daemon and, on Celery, a worker on the steps' queue "
        "before giving up (20)",
        20.0,
        metavar="SECONDS",
    )

    def states(self) -> list[str]:
        """The shard states asked for, all three when none is."""
        every = ["stale", "missing", "failed"]
        return [state for state in every if getattr(self, state)] or every

    def check_flags(self) -> None:
        if self.parallel < 1:
            raise UsageError(f"--parallel must be at least 1, got {self.parallel}")
        if (self.submit or self.follow) and self.parallel != 1:
            raise UsageError("--parallel is for shards run here; with --submit or --follow the instance runs them")
        if self.worker_wait < 0:
            raise UsageError(f"--worker-wait must not be negative, got {self.worker_wait:g}")
        if self.submit and self.follow:
            raise UsageError("--submit starts a new backfill, --follow watches one: give one of them")


class UiOptions(BaseModel):
    project: str = flag("the project root holding workspace.yaml (default: .)", ".")
    port: int = flag("the port of the UI on 127.0.0.1 (default 3000)", 3000)


def ui_command(args: argparse.Namespace, overrides: list[str]) -> None:
    from reverify_assets.cli.ui_command import start_ui

    _refuse_overrides("ui", overrides)
    options = parsed_options(args, UiOptions)
    start_ui(Path(options.project), options.port)


def shards_command(args: argparse.Namespace, overrides: list[str]) -> None:
    from reverify_assets.cli import rescoring_runs

    _refuse_overrides("shards", overrides)
    rescoring_runs.register_shards(parsed_options(args, RescoringFlags).chosen_variants().chosen[0])


def status_command(args: argparse.Namespace, overrides: list[str]) -> None:
    from reverify_assets.cli import rescoring_runs

    _refuse_overrides("status", overrides)
    for rescoring in parsed_options(args, RescoringFlags).chosen_variants().chosen:
        rescoring_runs.print_status(rescoring)


def backfill_command(args: argparse.Namespace, overrides: list[str]) -> None:
    from reverify_assets.cli import rescoring_runs
    from reverify_assets.defs.comparison_defs import build_comparison
    from reverify_assets.rescoring.status import ShardState

    _refuse_overrides("backfill", overrides)
    options = parsed_options(args, BackfillOptions)
    options.check_flags()
    variants = options.chosen_variants()
    states = [ShardState(state) for state in options.states()]
    if options.follow:
        from reverify_assets.cli.backfill_submit import follow_to_end

        follow_to_end(variants.chosen, options.follow, ui_url=options.ui_url)
        return
    if options.submit:
        from reverify_assets.cli.backfill_submit import submit

        submit(
            variants.chosen,
            states,
            aggregate=not options.no_aggregate,
            ui_url=options.ui_url,
            worker_wait_s=options.worker_wait,
        )
        return
    rescoring_runs.backfill(
        variants.chosen,
        states,
        aggregate=not options.no_aggregate,
        parallel=options.parallel,
        ui_url=options.ui_url,
        comparison=build_comparison(variants.every),
    )


@dataclass(frozen=True)
class _Variants:
    every: list[RescoringDefs]
    chosen: list[RescoringDefs]  # those --variant names, else every one


def _refuse_overrides(command: str, overrides: list[str]) -> None:
    """A rescoring's verifier and its overrides are in its YAML file: an override here would change nothing."""
    if overrides:
        raise UsageError(
            f"reverify {command} takes no ++overrides ({' '.join(overrides)}): a rescoring's are in the "
            "`verifier: overrides:` of its file in configs/rescorings/"
        )
