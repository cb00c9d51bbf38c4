"""Rescoring backfills that Dagster runs (``defs.submitted_backfills``), followed on the terminal until they end.

- ``reverify backfill NAME --submit`` hands the backfill to the Dagster instance's daemon, and ``--follow ID``
  watches one submitted before. Following is only watching: Ctrl-C stops it, never the backfill, and says how to
  follow it again. The command exits 0 when the backfill succeeded, 1 when it ended otherwise.
- ``reverify backfill NAME --parallel N`` runs the backfill on this machine, by Dagster's backfill loop and run
  queue hosted in the command (``defs.hosted_daemon``), N runs at a time. Ctrl-C cancels it: the backfill is
  the command's own.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from reverify_assets.cli.rescoring_runs import BACKFILL_TAGS, current_status, open_instance, register_shards
from reverify_assets.defs.code_location import IN_PROCESS_RUN_CONFIG
from reverify_assets.defs.dagster_internals import BulkActionStatus
from reverify_assets.defs.deployment import EXECUTOR_CONFIG_ENV
from reverify_assets.defs.hosted_daemon import STEP_S, HostedDaemon, hosted_by_this_command, hosted_daemon
from reverify_assets.defs.rescoring_defs import RescoringDefs
from reverify_assets.defs.submitted_backfills import (
    DAEMON_SILENT_S,
    BackfillProgress,
    backfill_daemon_heard,
    backfill_progress,
    failure_reasons,
    submit_backfill,
)
from reverify_assets.errors import StateError
from reverify_assets.rescoring.status import ShardState

if TYPE_CHECKING:
    from dagster import DagsterInstance

POLL_S = 2.0


def submit(
    variants: Sequence[RescoringDefs],
    states: Sequence[ShardState],
    *,
    aggregate: bool,
    ui_url: str,
    worker_wait_s: float,
) -> None:
    """Per variant, a backfill of its shards in ``states`` (and its aggregate), submitted; then each followed.
    Where the steps go to Celery, first the broker, the backend and a worker (waited for ``worker_wait_s``)."""
    # Registered first: the daemon's new-rollouts sensor launches a run for each shard it registers itself, which
    # would then be re-scored twice.
    register_shards(variants[0])
    if executor_config := os.environ.get(EXECUTOR_CONFIG_ENV, "").strip():
        # dagster-celery is an extra: imported only for a deployment that names Celery.
        from reverify_assets.defs.celery_workers import STEP_QUEUE, check_celery_workers

        workers = check_celery_workers(Path(executor_config), wait_s=worker_wait_s)
        print(f"Celery: {len(workers)} workers on queue {STEP_QUEUE!r}: {', '.join(workers)}")
    submitted: list[tuple[RescoringDefs, str]] = []
    with open_instance() as instance:
        _wait_for_the_daemon(instance, worker_wait_s)
        for rescoring in variants:
            todo = current_status(rescoring, instance).needing_work(*states)
            if not todo:
                print(f"{rescoring.label}: no shard is {' or '.join(s.value for s in states)}: nothing submitted")
                continue
            backfill_id = submit_backfill(instance, rescoring, todo, BACKFILL_TAGS, aggregate=aggregate)
            also = " and the aggregate" if aggregate else ""
            print(f"{rescoring.label}: backfill {backfill_id} submitted: {len(todo)} shards{also}")
            print(f"  in the UI: {backfill_page(ui_url, backfill_id)}")
            submitted.append((rescoring, backfill_id))
    failed = [
        f"{rescoring.label} ({backfill_id})"
        for rescoring, backfill_id in submitted
        if not follow(rescoring, backfill_id, ui_url=ui_url)
    ]
    if failed:
        raise StateError(f"backfill did not succeed: {', '.join(failed)} (see `reverify status`, or the UI)")


def run_here(rescoring: RescoringDefs, shards: Sequence[str], *, parallel: int, aggregate: bool, ui_url: str) -> str:
    """``--parallel``: the backfill of ``shards`` (and the aggregate) run here, at most ``parallel`` runs at once,
    and followed to its end; its id. Refused where a daemon runs the instance's backfills: it would take this one
    too, and two loops on one backfill would both launch its runs."""
    with open_instance() as instance:
        heard = backfill_daemon_heard(instance)
    if heard is not None and heard <= DAEMON_SILENT_S:
        raise StateError(
            f"a Dagster daemon runs the backfills of the instance at {instance.root_directory} (heard {heard:.0f} s "
            "ago; `reverify ui` starts one): hand it this backfill with --submit, or stop it to run the shards here "
            "with --parallel"
        )
    invoked_in = Path.cwd()  # the daemon works in the project's folder
    with hosted_daemon(rescoring.spec.root, parallel) as daemon:
        backfill_id = submit_backfill(
            daemon.instance,
            rescoring,
            shards,
            {**BACKFILL_TAGS, **hosted_by_this_command()},
            aggregate=aggregate,
            run_config=IN_PROCESS_RUN_CONFIG,
        )
        also = " and the aggregate" if aggregate else ""
        print(f"  backfill {backfill_id}: {len(shards)} shards{also}, at most {parallel} runs at once")
        print(f"  in the UI (reverify ui): {backfill_page(ui_url, backfill_id)}")
        follow(rescoring, backfill_id, ui_url=ui_url, daemon=daemon, invoked_in=invoked_in)
        ended = daemon.instance.get_backfill(backfill_id)
    # A shard that failed leaves the others' results, and the aggregate over them, as in one process; a backfill
    # Dagster stopped (its code location failing to load, say) or cancelled has nothing to show.
    if ended is not None and ended.status in (BulkActionStatus.FAILED, BulkActionStatus.CANCELED):
        raise StateError(f"backfill {backfill_id} of {rescoring.label} {ended.status.value.lower()}")
    return backfill_id


def _wait_for_the_daemon(instance: DagsterInstance, wait_s: float) -> None:
    """Refuses to submit a backfill that no daemon would run (waiting ``wait_s`` for one just started)."""
    deadline = time.monotonic() + wait_s
    while (heard := backfill_daemon_heard(instance)) is None or heard > DAEMON_SILENT_S:
        if time.monotonic() >= deadline:
            last = "never" if heard is None else f"{heard:.0f} s ago"
            raise StateError(
                f"no Dagster daemon runs backfills for the instance at {instance.root_directory} (last heard from: "
                f"{last}); waited {wait_s:.0f} s. Start one where the project is: dagster-daemon run -w "
                "workspace.yaml"
            )
        time.sleep(POLL_S)


def follow_to_end(variants: Sequence[RescoringDefs], backfill_id: str, *, ui_url: str) -> None:
    """``--follow``: the backfill of whichever of ``variants`` it targets, followed to its end."""
    with open_instance() as instance:
        backfill = instance.get_backfill(backfill_id)
        if backfill is None:
            raise StateError(f"no backfill {backfill_id} in the Dagster instance at {instance.root_directory}")
    targeted = set(backfill.asset_selection or [])
    rescoring = next((r for r in variants if r.reverified_key in targeted), None)
    if rescoring is None:
        raise StateError(
            f"backfill {backfill_id} is not one of {', '.join(r.label for r in variants)}: "
            f"it targets {', '.join(key.to_user_string() for key in sorted(targeted)) or 'no asset'}"
        )
    if not follow(rescoring, backfill_id, ui_url=ui_url):
        raise StateError(f"backfill {backfill_id} of {rescoring.label} did not succeed")


def follow(
    rescoring: RescoringDefs,
    backfill_id: str,
    *,
    ui_url: str,
    daemon: HostedDaemon | None = None,
    invoked_in: Path | None = None,
) -> bool:
    """Prints the backfill's progress as it changes until it ends; whether it succeeded. With ``daemon``, its
    loops take their turns meanwhile, and Ctrl-C cancels the backfill. ``invoked_in``: the folder the command was
    started in, for the commands it suggests (default: the working directory)."""
    project_flag = _project_flag(rescoring, invoked_in or Path.cwd())
    last: tuple[object, ...] = ()
    next_look = 0.0
    try:
        with open_instance() as instance:
            while True:
                if daemon is not None:
                    daemon.step(backfill_id)
                if daemon is None or time.monotonic() >= next_look or daemon.ended(backfill_id):
                    try:
                        progress = backfill_progress(instance, backfill_id, rescoring)
                    except LookupError:
                        raise StateError(
                            f"no backfill {backfill_id} in the Dagster instance at {instance.root_directory}"
                        ) from None
                    if (counts := progress.counts()) != last:
                        print(f"  {progress.line()}", flush=True)
                        last = counts
                    if progress.ended:
                        # Run here, each shard's line follows, with its reason.
                        reasons = failure_reasons(instance, backfill_id) if daemon is None else {}
                        _print_end(rescoring, backfill_id, progress, reasons)
                        return progress.succeeded
                    next_look = time.monotonic() + POLL_S
                time.sleep(POLL_S if daemon is None else STEP_S)
    except KeyboardInterrupt:
        if daemon is not None:
            print(f"reverify: canceling backfill {backfill_id}: stopping its runs", file=sys.stderr, flush=True)
            daemon.cancel(backfill_id)
            print(
                f"reverify: backfill {backfill_id} canceled; re-score the shards it left with `reverify backfill "
                f"{rescoring.spec.name}{project_flag}`",
                file=sys.stderr,
            )
            raise
        print(
            f"reverify: stopped following backfill {backfill_id}; it goes on. Follow it again with `reverify "
            f"backfill {rescoring.spec.name}{project_flag} --follow {backfill_id}`, or in the UI: "
            f"{backfill_page(ui_url, backfill_id)}",
            file=sys.stderr,
        )
        raise


def _project_flag(rescoring: RescoringDefs, invoked_in: Path) -> str:
    return "" if rescoring.spec.root == invoked_in.resolve() else f" --project {rescoring.spec.root}"


def backfill_page(ui_url: str, backfill_id: str) -> str:
    return f"{ui_url.rstrip('/')}/runs/b/{backfill_id}"


def _print_end(rescoring: RescoringDefs, backfill_id: str, progress: BackfillProgress, reasons: dict[str, str]) -> None:
    print(f"{rescoring.label}: backfill {backfill_id} {progress.status.value.lower()} after {progress.seconds:.0f} s")
    if progress.error:
        print(f"  Dagster stopped it: {progress.error}")
    for shard, reason in reasons.items():
        print(f"  {shard} failed: {reason}")
    if reasons:
        print(f"  resubmit the failed shards: reverify backfill {rescoring.spec.name} --failed --submit")
