"""Runs the command line makes, recorded as runs of the project's code location, so that the UI can re-execute them
(``failures.command_errors`` turns a step's error back into the command's own).

``execute_in_process`` records no origin for its runs: the UI shows their job as "not found" and refuses to
re-execute them. The CLI runs the same jobs the code location defines (``workspace.yaml`` names it
``CODE_LOCATION``), in this process so that what its start-up prepared is used, and records that location as
the run's origin: "Re-execute" then launches the job there with the run's own config (its files and flags).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import dagster as dg

from reverify_assets.defs.dagster_internals import (
    LoadableTargetOrigin,
    ManagedGrpcPythonEnvCodeLocationOrigin,
    RemoteJobOrigin,
    RemoteRepositoryOrigin,
    UnresolvedAssetJobDefinition,
)

# Dagster's per-event console log is for the UI; on a terminal the user sees our summary instead. One process, as
# on the command line, for the run and for its re-execution from the UI.
IN_PROCESS_RUN_CONFIG = {
    "loggers": {"console": {"config": {"log_level": "CRITICAL"}}},
    "execution": {"config": {"in_process": {}}},
}
CODE_LOCATION = "reverify-assets"  # workspace.yaml's location_name
REPOSITORY = "__repository__"  # what Dagster names the repository of a module's Definitions
DEFINITIONS_FILE = "definitions.py"


def remote_origin(job_name: str, project: Path) -> RemoteJobOrigin:
    target = LoadableTargetOrigin(
        executable_path=sys.executable,
        python_file=str(project / DEFINITIONS_FILE),
        working_directory=str(project),
    )
    location = ManagedGrpcPythonEnvCodeLocationOrigin(target, CODE_LOCATION)
    return RemoteJobOrigin(RemoteRepositoryOrigin(location, REPOSITORY), job_name)


def run_job(
    job: UnresolvedAssetJobDefinition,
    assets: Sequence[dg.AssetsDefinition],
    resources: Mapping[str, Any],
    instance: dg.DagsterInstance,
    *,
    project: Path,
    run_config: Mapping[str, Any],
    tags: Mapping[str, str],
    partition_key: str | None = None,
    asset_selection: list[dg.AssetKey] | None = None,
    raise_on_error: bool = True,
) -> dg.ExecuteInProcessResult:
    """``job`` (one the code location defines too, over ``assets``) in this process, its run recorded as the code
    location's (see the module's docstring)."""
    resolved = dg.Definitions(assets=assets, jobs=[job], resources=resources).resolve_job_def(job.name)
    with _runs_originate_in(instance, remote_origin(job.name, project)):
        return resolved.execute_in_process(
            run_config=dict(run_config),
            instance=instance,
            partition_key=partition_key,
            tags=dict(tags),
            asset_selection=asset_selection,
            raise_on_error=raise_on_error,
        )


@contextmanager
def _runs_originate_in(instance: dg.DagsterInstance, origin: RemoteJobOrigin) -> Iterator[None]:
    """``execute_in_process`` creates its run through ``instance.create_run_for_job``, with no origin: this one
    instance object adds it for the duration (Dagster 1.13 has no parameter for it). Re-execution reads only the
    origin's location and repository names, and launches the job as that location defines it now."""
    create = instance.create_run_for_job

    def create_with_origin(**kwargs: Any) -> Any:
        return create(**kwargs, remote_job_origin=origin)

    instance.create_run_for_job = create_with_origin  # type: ignore[method-assign]
    try:
        yield
    finally:
        del instance.create_run_for_job  # the class's method again
