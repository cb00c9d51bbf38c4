"""Every name this package takes from Dagster's private modules (``dagster._…``), and what the public API lacks.

Dagster may move or change these in any release: this is the one module to read on an upgrade (the pin is in
``pyproject.toml``), and ``tests/unit/test_dagster_internals.py`` fails when another module imports one directly.

What each is for:

- ``reverify backfill --parallel`` hosts Dagster's own daemon loops for the length of the command
  (``hosted_daemon``), which needs:
  - ``RunLauncher``, ``LaunchRunContext``, ``ConfigurableClass``, ``ConfigurableClassData``: a run launcher that
    ``dagster.yaml`` can name; launchers have no public base class;
  - ``InstanceRef``: the instance's configuration, to open it again in the forked run workers;
  - ``execute_backfill_jobs``, ``QueuedRunCoordinatorDaemon``, ``WorkspaceProcessContext``,
    ``InProcessWorkspaceLoadTarget``, ``InProcessCodeLocationOrigin``: one iteration of the backfill loop and of
    the run queue's loop, on the command's clock (``dagster-daemon`` sleeps 30 s between backfill iterations), with
    the in-process workspace they take;
  - ``execute_run_command_body``, ``capture_interrupts``: the body of ``dagster api execute_run``, run in a forked
    worker instead of a fresh interpreter (1.7 s of imports a run), under the interrupt capture that command sets.
- ``PartitionBackfill``, ``BulkActionsFilter``, ``BulkActionStatus``, ``BULK_ACTION_TERMINAL_STATUSES``: the
  public ``instance.get_backfills`` returns and takes these, but none is exported.
- ``NOT_FINISHED_STATUSES``: the public ``dg.DagsterRunStatus`` has no name for the set.
- ``RemoteJobOrigin``, ``RemoteRepositoryOrigin``, ``ManagedGrpcPythonEnvCodeLocationOrigin``,
  ``LoadableTargetOrigin``: ``execute_in_process`` records no origin for a run, so the UI shows its job as "not
  found" and refuses to re-execute it; the command line's runs are recorded with the code location's origin.
- ``UnresolvedAssetJobDefinition``: what ``dg.define_asset_job`` returns; the public API does not export the name
  our annotations need.
- ``DagsterUserCodeProcessError``, ``SerializableErrorInfo``, ``normalize_metadata``: a step failure Dagster
  records as it is given, without the stack of its own machinery (``failures.Refusal``; ``dg.Failure`` alone always
  carries one); ``SerializableErrorInfo`` is also what a tick's or run's error is, which the public API hands out.
- ``CapturedLogContext``: what the compute log manager's ``capture_logs`` yields, for the wrapper that starts its
  watchers deaf to Ctrl-C (``log_capture``).
"""

# ruff: noqa: F401 - re-exports

from __future__ import annotations

from dagster._cli.api import _execute_run_command_body as execute_run_command_body
from dagster._core.definitions.metadata import normalize_metadata
from dagster._core.definitions.unresolved_asset_job_definition import UnresolvedAssetJobDefinition
from dagster._core.errors import DagsterUserCodeProcessError
from dagster._core.execution.backfill import (
    BULK_ACTION_TERMINAL_STATUSES,
    BulkActionsFilter,
    BulkActionStatus,
    PartitionBackfill,
)
from dagster._core.instance.ref import InstanceRef
from dagster._core.launcher import LaunchRunContext, RunLauncher
from dagster._core.remote_origin import (
    InProcessCodeLocationOrigin,
    ManagedGrpcPythonEnvCodeLocationOrigin,
    RemoteJobOrigin,
    RemoteRepositoryOrigin,
)
from dagster._core.storage.compute_log_manager import CapturedLogContext
from dagster._core.storage.dagster_run import NOT_FINISHED_STATUSES
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin
from dagster._core.workspace.context import WorkspaceProcessContext
from dagster._core.workspace.load_target import InProcessWorkspaceLoadTarget
from dagster._daemon.backfill import execute_backfill_jobs
from dagster._daemon.run_coordinator.queued_run_coordinator_daemon import QueuedRunCoordinatorDaemon
from dagster._serdes import ConfigurableClass, ConfigurableClassData
from dagster._utils.error import SerializableErrorInfo
from dagster._utils.interrupts import capture_interrupts
