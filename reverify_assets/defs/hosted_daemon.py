"""The Dagster daemon's backfill loop and run queue, hosted by ``reverify backfill --parallel N`` for the one
backfill it submits, where no daemon runs the instance's backfills.

A ``--parallel`` backfill is the same Dagster partition backfill as ``--submit`` (``submitted_backfills``):
Dagster's asset-backfill iteration decides which shard runs to request and when the aggregate may follow, and
Dagster's run queue (a ``QueuedRunCoordinator`` limited to N runs) when each run starts. The runs are ordinary
runs of the project's code location, each executed in a process of its own by Dagster's run worker code, on the
instance the command uses. Two things are ours:

- When the iterations run. ``dagster-daemon`` sleeps 30 s between backfill iterations, so that a backfill of
  short shards would wait longer for its aggregate and its end than it ran. Here both loops take a turn as soon
  as a run ends (and every ``IDLE_STEP_S`` regardless).
- How the runs' processes start and end (``ChildRunLauncher``): forked from a process that has already imported
  Dagster and this package, and stopped by the kernel if the command is killed. Dagster's ``DefaultRunLauncher``
  starts a fresh interpreter per run from a gRPC code server, which a killed command would leave running.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import multiprocessing
import multiprocessing.forkserver
import os
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg
import yaml

from reverify_assets.defs import project as project_module
from reverify_assets.defs.code_location import CODE_LOCATION, DEFINITIONS_FILE
from reverify_assets.defs.dagster_internals import (
    BULK_ACTION_TERMINAL_STATUSES,
    NOT_FINISHED_STATUSES,
    BulkActionsFilter,
    BulkActionStatus,
    ConfigurableClass,
    ConfigurableClassData,
    InProcessCodeLocationOrigin,
    InProcessWorkspaceLoadTarget,
    InstanceRef,
    LaunchRunContext,
    LoadableTargetOrigin,
    PartitionBackfill,
    QueuedRunCoordinatorDaemon,
    RunLauncher,
    SerializableErrorInfo,
    WorkspaceProcessContext,
    capture_interrupts,
    execute_backfill_jobs,
    execute_run_command_body,
)
from reverify_assets.defs.deployment import EXECUTOR_CONFIG_ENV
from reverify_assets.defs.instance import open_dagster_instance
from reverify_assets.defs.project import WORKING_DIRECTORY_LOCATION
from reverify_assets.defs.submitted_backfills import BACKFILL_TAG
from reverify_assets.errors import StateError
from reverify_assets.processes import interrupts
from reverify_assets.processes.lifelines import die_with_parent

# Both loops again after this long with no run ended: a backfill moves on some steps (its end once its last run is
# seen finished) without a run ending in between.
IDLE_STEP_S = 5.0
# Between two runs launched by one turn of the run queue (at the start, N at once; later, a run as another ends).
# Dagster 1.13 claims a pool slot with ``SELECT ... FOR UPDATE SKIP LOCKED`` outside a transaction and then
# updates that row by id (``SqlEventLogStorage._claim_concurrency_slot``): two steps claiming at the same instant
# can both take the one free slot, overrunning the ``verifier`` pool. Runs launched together are the ones that
# claim together; a second apart is more than the spread of the steps before a verify step (about a second on 2
# cores) and short next to a shard.
LAUNCH_STAGGER_S = 1.0
# How often the command looks for runs that ended: what a shard's end may wait for the next run's launch.
STEP_S = 0.25
# The run queue's turns while it has room for a run: the backfill's thread may have queued one meanwhile.
DEQUEUE_S = 1.0
# What a cancelled run gets to stop its step and its verifier servers before it is killed.
CANCEL_WAIT_S = 30.0
_TAIL_BYTES = 2000
HOSTED_BY_TAG = "reverify/hosted_by"  # host:pid:start of the command running the backfill
# What the loops log is the daemon's log, for its operators; the command prints its progress instead, and the
# errors the loops catch (``_report``).
_LOGGER = logging.getLogger("reverify.hosted_daemon")
for _logger in (_LOGGER, logging.getLogger("dagster.daemon.QueuedRunCoordinatorDaemon")):
    _logger.propagate = False
    _logger.addHandler(logging.NullHandler())


# Each run's process is forked from one that imported Dagster and this package once (``multiprocessing``'s fork
# server): a run then starts in about 0.2 s, where a fresh `dagster api execute_run` process took 1.7 s to import
# them, which on 2 cores made shards of a second or two take twice as long
# as in one process. The fork server stops when this process does (it reads EOF on a pipe from it); each run stops
# with the fork server (``_execute_run``).
_FORKED = multiprocessing.get_context("forkserver")
_FORKED.set_forkserver_preload([__name__])


@dataclass
class _RunProcess:
    process: multiprocessing.process.BaseProcess
    output: Path  # its stdout and stderr: what it said if it dies before recording its end


class ChildRunLauncher(RunLauncher, ConfigurableClass):
    """Launches each run in a process of its own, in a process group of its own (a terminal's Ctrl-C reaches the
    command, which cancels the backfill) and stopped by the kernel if this process dies. The process runs the
    run as ``dagster api execute_run`` does. The run queue calls ``launch_run``; the backfill's cancellation
    calls ``terminate``."""

    def __init__(self, working_directory: str, inst_data: ConfigurableClassData | None = None) -> None:
        self._working_directory = working_directory
        self._inst_data = inst_data
        self._runs: dict[str, _RunProcess] = {}
        self._launched_this_turn = 0
        self._outputs = tempfile.TemporaryDirectory(prefix="reverify-runs-")
        super().__init__()

    @property
    def inst_data(self) -> ConfigurableClassData | None:
        return self._inst_data

    @classmethod
    def config_type(cls) -> dict[str, Any]:
        return {"working_directory": dg.Field(str, description="the project folder: where each run starts")}

    @classmethod
    def from_config_value(cls, inst_data: ConfigurableClassData, config_value: Mapping[str, Any]) -> ChildRunLauncher:
        return cls(working_directory=config_value["working_directory"], inst_data=inst_data)

    def launch_run(self, context: LaunchRunContext) -> None:
        run = context.dagster_run
        output = Path(self._outputs.name) / f"{run.run_id}.log"
        ref = dg.serialize_value(self._instance.get_ref())
        process = _FORKED.Process(
            target=_execute_run,
            args=(run.run_id, ref, self._working_directory, str(output)),
            name=f"run {run.run_id}",
        )
        # Dagster marked the run STARTING: a Ctrl-C now would leave it so, or its process untracked.
        with interrupts.deferred():
            if self._launched_this_turn:
                time.sleep(LAUNCH_STAGGER_S)
            process.start()
            self._launched_this_turn += 1
            self._runs[run.run_id] = _RunProcess(process, output)
        self._instance.report_engine_event(f"Started process for run (pid: {process.pid}).", run, cls=type(self))

    def terminate(self, run_id: str) -> bool:
        child = self._runs.get(run_id)
        run = self._instance.get_run_by_id(run_id)
        if child is None or run is None or not child.process.is_alive() or child.process.pid is None:
            return False
        self._instance.report_run_canceling(run)
        os.kill(child.process.pid, signal.SIGINT)  # Dagster's run worker stops its step, records the run canceled
        return True

    def reap(self) -> bool:
        """Forgets the runs whose processes ended (recording as failed any that died before recording its end);
        whether one had."""
        ended = [run_id for run_id, child in self._runs.items() if child.process.exitcode is not None]
        for run_id in ended:
            child = self._runs.pop(run_id)
            run = self._instance.get_run_by_id(run_id)
            if run is not None and not run.is_finished:
                self._instance.report_run_failed(
                    run, f"its process exited with status {child.process.exitcode}: {_tail(child.output)}"
                )
            child.output.unlink(missing_ok=True)
        return bool(ended)

    def new_turn(self) -> None:
        """The run queue takes a turn: its first launch goes at once."""
        self._launched_this_turn = 0

    def terminate_all(self) -> None:
        for run_id in list(self._runs):
            self.terminate(run_id)

    @property
    def running(self) -> int:
        return len(self._runs)

    def kill_all(self) -> None:
        for child in self._runs.values():
            if child.process.pid is not None:
                for kill in (os.killpg, os.kill):  # its group: the run and its servers; itself, if not a leader yet
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        kill(child.process.pid, signal.SIGKILL)
            child.process.join()
        self.reap()

    def dispose(self) -> None:
        self.kill_all()
        self._outputs.cleanup()


def _execute_run(run_id: str, serialized_ref: str, working_directory: str, output: str) -> None:
    """In the run's own process: what ``dagster api execute_run`` does with the run, its output to ``output``."""
    os.setpgid(0, 0)
    die_with_parent()  # the fork server, which ends with the command
    os.chdir(working_directory)
    with open(output, "ab", buffering=0) as sink:
        os.dup2(sink.fileno(), sys.stdout.fileno())
        os.dup2(sink.fileno(), sys.stderr.fileno())
    with (
        capture_interrupts(),
        dg.DagsterInstance.from_ref(dg.deserialize_value(serialized_ref, InstanceRef)) as instance,
    ):
        status = execute_run_command_body(run_id, instance, lambda _: None, set_exit_code_on_failure=True)
    sys.exit(status)


def _tail(output: Path) -> str:
    try:
        with output.open("rb") as said:
            said.seek(max(0, said.seek(0, os.SEEK_END) - _TAIL_BYTES))
            return said.read().decode(errors="replace").strip() or "it said nothing"
    except OSError:
        return "it said nothing"


class HostedDaemon:
    """Both loops, for one backfill, on the instance and code location ``hosted_daemon`` opened.

    The backfill's iterations run on a thread of their own: the first creates every shard's run, each with its
    own SQLite event log on a local instance (a tenth of a second or more a run), and the run queue launches the
    first runs while it goes on. The queue's turns stay on the calling thread, where a signal interrupts them."""

    def __init__(self, context: WorkspaceProcessContext, max_runs: int) -> None:
        self._context = context
        self._instance = context.instance
        self.max_runs = max_runs
        launcher = self._instance.run_launcher
        assert isinstance(launcher, ChildRunLauncher)
        self._launcher = launcher
        self._queue = QueuedRunCoordinatorDaemon(interval_seconds=IDLE_STEP_S)
        self._backfill_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="reverify_backfill_loop")
        self._iteration: Future[list[SerializableErrorInfo | None]] | None = None
        self._backfill_due = True  # a run ended (or nothing ran yet) since the last iteration began
        self._last_iteration = self._last_dequeue = -IDLE_STEP_S
        self._backfill_id: str | None = None  # the one it runs, once stepped
        self._canceling = False

    @property
    def instance(self) -> dg.DagsterInstance:
        """The command's instance, as the loops see it (its run queue and launcher are theirs)."""
        return self._instance

    def ended(self, backfill_id: str) -> bool:
        backfill = self._instance.get_backfill(backfill_id)
        return backfill is None or backfill.status in BULK_ACTION_TERMINAL_STATUSES

    def step(self, backfill_id: str) -> None:
        """The loops' turns that are due: the backfill's iteration after a run ended (or ``IDLE_STEP_S`` passed),
        once the last one is done; the run queue's after a run ended, or every ``DEQUEUE_S`` while it has room."""
        self._backfill_id = backfill_id
        ended = self._launcher.reap()
        self._backfill_due = self._backfill_due or ended
        now = time.monotonic()
        if self._iteration is not None and self._iteration.done():
            _report(self._iteration.result())
            self._iteration = None
        if self._iteration is None and (self._backfill_due or now - self._last_iteration >= IDLE_STEP_S):
            backfill = self._instance.get_backfill(backfill_id)
            if backfill is None:
                raise StateError(f"no backfill {backfill_id} in the instance at {self._instance.root_directory}")
            self._backfill_due, self._last_iteration = False, now
            self._iteration = self._backfill_thread.submit(
                lambda: list(execute_backfill_jobs(self._context, _LOGGER, [backfill]))
            )
        has_room = self._launcher.running < self.max_runs and now - self._last_dequeue >= DEQUEUE_S
        if not self._canceling and (ended or has_room):
            self._last_dequeue = now
            self._launcher.new_turn()
            _report(self._queue.run_iteration(self._context))

    def cancel(self, backfill_id: str) -> None:
        """Cancels the backfill as the UI does: its running runs told to stop at once (each stops its verifier
        servers), its queued ones dropped and none launched; whatever has not stopped within ``CANCEL_WAIT_S``
        is killed."""
        deadline = time.monotonic() + CANCEL_WAIT_S
        self._canceling = True
        try:
            backfill = self._instance.get_backfill(backfill_id)
            if backfill is not None and backfill.status not in BULK_ACTION_TERMINAL_STATUSES:
                self._instance.update_backfill(backfill.with_status(BulkActionStatus.CANCELING))
            self._launcher.terminate_all()
            while not self.ended(backfill_id) and time.monotonic() < deadline:
                self._backfill_due = True
                self.step(backfill_id)
                time.sleep(STEP_S)
            while self._launcher.running and time.monotonic() < deadline:
                self._launcher.reap()
                time.sleep(STEP_S)
        finally:
            self._stop()

    def close(self) -> None:
        """On the way out: a backfill still in progress (the command failed, or was interrupted outside
        ``follow``) is cancelled, so that no daemon started later runs what it left; then ``_stop``."""
        if self._backfill_id is not None and not self._canceling and not self.ended(self._backfill_id):
            self.cancel(self._backfill_id)
        else:
            self._stop()

    def _stop(self) -> None:
        """Every run it launched killed (its last words recorded); the backfill's iteration let finish its chunk
        of runs (after a cancellation, it stops at the end of one)."""
        self._launcher.kill_all()
        self._backfill_thread.shutdown(wait=True, cancel_futures=True)


@contextmanager
def hosted_daemon(project: Path, max_runs: int) -> Iterator[HostedDaemon]:
    """The command's instance with Dagster's run queue limited to ``max_runs`` runs and ``ChildRunLauncher``, and
    the project's code location loaded in this process; every run it launched is stopped on the way out.

    The shards run here whatever executor the deployment names (``REVERIFY_EXECUTOR_CONFIG`` is for backfills
    handed to its daemon): the variable is unset while the code location loads and its runs start."""
    with open_dagster_instance() as instance:
        ref = _with_local_queue(instance.get_ref(), max_runs, project)
        cancel_orphans(instance)
        _refuse_a_shared_queue(instance)
    origin = InProcessCodeLocationOrigin(_project_location(project), location_name=CODE_LOCATION)
    executor_config = os.environ.pop(EXECUTOR_CONFIG_ENV, None)
    try:
        # Unset first: the runs are forked from the fork server, with its environment. Its imports take a core
        # for a second or two: meanwhile, this process loads the code location.
        multiprocessing.forkserver.ensure_running()
        with dg.DagsterInstance.from_ref(ref) as instance, _loaded_in(project, instance, origin) as context:
            daemon = HostedDaemon(context, max_runs)
            try:
                yield daemon
            finally:
                daemon.close()
    finally:
        if executor_config is not None:
            os.environ[EXECUTOR_CONFIG_ENV] = executor_config


def hosted_by_this_command() -> dict[str, str]:
    """The tag of a backfill this command runs: whose it is, for ``cancel_orphans`` if the command is killed."""
    return {HOSTED_BY_TAG: f"{socket.gethostname()}:{os.getpid()}:{_started(os.getpid())}"}


def cancel_orphans(instance: dg.DagsterInstance) -> list[str]:
    """Cancels the backfills a killed ``--parallel`` command left behind (their tag names a process of this
    machine that is gone), with their unfinished runs: a daemon started later would otherwise run them again,
    behind a newer backfill of the same shards. Their ids."""
    orphans = [
        backfill for backfill in _hosted_backfills_in_progress(instance) if not _alive(backfill.tags[HOSTED_BY_TAG])
    ]
    for backfill in orphans:
        runs = instance.get_runs(
            filters=dg.RunsFilter(tags={BACKFILL_TAG: backfill.backfill_id}, statuses=NOT_FINISHED_STATUSES)
        )
        for run in runs:
            instance.report_run_canceled(run, message="The command that ran its backfill was killed.")
        instance.update_backfill(backfill.with_status(BulkActionStatus.CANCELED).with_end_timestamp(time.time()))
    return [backfill.backfill_id for backfill in orphans]


def _refuse_a_shared_queue(instance: dg.DagsterInstance) -> None:
    """The run queue hosted here takes every queued run of the instance: refused while another command's
    ``--parallel`` backfill runs, or runs wait there for a daemon (they would be launched here, in this
    project's folder)."""
    for backfill in _hosted_backfills_in_progress(instance):
        host, pid, _ = backfill.tags[HOSTED_BY_TAG].rsplit(":", 2)
        raise StateError(
            f"another `reverify backfill --parallel` (pid {pid} on {host}) runs backfill {backfill.backfill_id} "
            f"on the Dagster instance at {instance.root_directory}: wait for it to end, or hand this backfill "
            "to a daemon with --submit"
        )
    queued = instance.get_runs(filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.QUEUED]), limit=1)
    if queued:
        raise StateError(
            f"runs wait in the run queue of the Dagster instance at {instance.root_directory} for a daemon (one: "
            f"run {queued[0].run_id} of {queued[0].job_name}); --parallel would launch them here. Start a daemon "
            "to run them (`reverify ui`, or `dagster-daemon run`) or cancel them in the UI"
        )


def _hosted_backfills_in_progress(instance: dg.DagsterInstance) -> list[PartitionBackfill]:
    """The backfills a ``--parallel`` command runs (or ran, if it was killed) that have not ended."""
    in_progress = [BulkActionStatus.REQUESTED, BulkActionStatus.CANCELING, BulkActionStatus.FAILING]
    backfills = instance.get_backfills(filters=BulkActionsFilter(statuses=in_progress))
    return [backfill for backfill in backfills if HOSTED_BY_TAG in backfill.tags]


def _alive(owner: str) -> bool:
    """Whether the process a ``hosted_by_this_command`` tag names still runs; one of another machine is taken
    to, as nothing here can tell."""
    host, pid, started = owner.rsplit(":", 2)
    return host != socket.gethostname() or (pid.isdigit() and _started(int(pid)) == started)


def _started(pid: int) -> str:
    """When the process started (clock ticks since boot): with the pid, names it even once the pid is reused;
    empty if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[1].split()[19]


@contextmanager
def _loaded_in(
    project: Path, instance: dg.DagsterInstance, origin: InProcessCodeLocationOrigin
) -> Iterator[WorkspaceProcessContext]:
    """The code location loaded here, this process working in ``project`` until it is closed: a project without
    a definitions file of its own is the one in the working directory, and Dagster loads it again to plan each
    run."""
    with contextlib.chdir(project), WorkspaceProcessContext(instance, InProcessWorkspaceLoadTarget(origin)) as context:
        yield context


def _project_location(project: Path) -> LoadableTargetOrigin:
    """The project's ``definitions.py``, or ours for a project folder without one."""
    if (project / DEFINITIONS_FILE).is_file():
        return LoadableTargetOrigin(
            executable_path=sys.executable, python_file=str(project / DEFINITIONS_FILE), working_directory=str(project)
        )
    return LoadableTargetOrigin(
        executable_path=sys.executable,
        module_name=project_module.__name__,
        attribute=WORKING_DIRECTORY_LOCATION,
        working_directory=str(project),
    )


def _with_local_queue(ref: InstanceRef, max_runs: int, project: Path) -> InstanceRef:
    """``ref`` with the run queue limited to ``max_runs`` and ``ChildRunLauncher`` (starting the runs in
    ``project``). The rest of the queue's own settings (its tag limits, wherever the instance gives them) and
    of the instance (its pools) stays as it is."""
    settings = copy.deepcopy(dict(ref.settings or {}))
    runs = (settings.get("concurrency") or {}).get("runs")
    coordinator = ref.run_coordinator_data
    own = (
        yaml.safe_load(coordinator.config_yaml) or {}
        if coordinator is not None and coordinator.class_name == "QueuedRunCoordinator"
        else {}
    )
    if isinstance(runs, dict):  # Dagster 1.13 takes these over the coordinator's, and refuses both
        runs["max_concurrent_runs"] = max_runs
    else:
        own["max_concurrent_runs"] = max_runs
    return ref._replace(
        run_coordinator_data=ConfigurableClassData(
            "dagster._core.run_coordinator", "QueuedRunCoordinator", yaml.safe_dump(own)
        ),
        run_launcher_data=ConfigurableClassData(
            __name__, ChildRunLauncher.__name__, yaml.safe_dump({"working_directory": str(project)})
        ),
        settings=settings,
    )


def _report(iteration: Iterable[Any]) -> None:
    """Runs a daemon iteration to its end; the errors it caught (which the backfill's own retries then handle),
    one line each. The run queue's own errors are recorded in the run it could not launch."""
    for error in iteration:
        if isinstance(error, SerializableErrorInfo):
            first = next(iter(error.message.strip().splitlines()), error.cls_name)
            print(f"reverify: Dagster's backfill loop: {first}", file=sys.stderr)
