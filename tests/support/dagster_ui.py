"""``reverify ui`` started as a user would, and asked over GraphQL what its code server loaded."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import orjson

from reverify_assets.defs.code_location import CODE_LOCATION, REPOSITORY
from tests.support.cli import REVERIFY
from tests.support.postgres import free_port
from tests.support.process_tree import descendants, kill_all

# `dagster dev` starts a webserver, a daemon and a code server that imports Dagster and the definitions: about
# 15 s on a quiet machine, several times that on a busy one.
UI_START_S = 300.0
# A run the UI launches waits for the daemon to dequeue it, then starts a process per step (seconds each).
UI_RUN_S = 600.0
ASSET_NODES = "{ assetNodes { assetKey { path } groupName isPartitioned partitionKeysByDimension { partitionKeys } } }"


def graphql(url: str, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
    body = orjson.dumps({"query": query, "variables": variables or {}})
    request = urllib.request.Request(f"{url}/graphql", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as reply:
        return orjson.loads(reply.read())


def start_ui(project: Path, home: Path, port: int, output: IO[Any] | int) -> subprocess.Popen[str]:
    """``reverify ui`` in a session of its own, as a terminal's foreground job leads its own process group."""
    return subprocess.Popen(
        [REVERIFY, "ui", "--port", str(port)],
        cwd=project,
        env={**os.environ, "DAGSTER_HOME": str(home)},
        stdout=output,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def loaded_asset_nodes(url: str, timeout: float = 120) -> dict[str, Any] | None:
    """The UI's answer once its code server has loaded the assets (None if it never did within ``timeout``)."""
    deadline, answer = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        try:
            answer = graphql(url, ASSET_NODES)
            if answer.get("data", {}).get("assetNodes"):
                return answer
        except OSError:
            pass
        time.sleep(1)
    return answer


@contextmanager
def running_ui(project: Path, home: Path, log: Path) -> Iterator[str]:
    """``reverify ui`` on ``home`` until the block ends, its code location loaded; its URL. Stopped as a terminal's
    Ctrl-C stops it, and whatever of its process tree outlives that is killed."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with open(log, "w") as output:
        ui = start_ui(project, home, port, output)
        try:
            if not loaded_asset_nodes(url, timeout=UI_START_S):
                raise AssertionError(f"reverify ui never loaded its code location (log: {log})")
            yield url
        finally:
            tree = descendants(ui.pid)
            os.killpg(ui.pid, signal.SIGINT)
            try:
                ui.wait(timeout=60)
            except subprocess.TimeoutExpired:
                ui.kill()
                ui.wait()
            kill_all(tree)


LAUNCH_RUN = """
mutation Launch($params: ExecutionParams!) {
  launchRun(executionParams: $params) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on PythonError { message }
    ... on RunConfigValidationInvalid { errors { message } }
  }
}"""
RUN_STATUS = "query Status($id: ID!) { runOrError(runId: $id) { ... on Run { status } } }"
FINISHED = ("SUCCESS", "FAILURE", "CANCELED")


def launch_job(url: str, job: str, tags: dict[str, str]) -> str:
    """The job launched as the UI's Launchpad does, with the code location's own resources; its run's id."""
    params = {
        "selector": {"repositoryLocationName": CODE_LOCATION, "repositoryName": REPOSITORY, "jobName": job},
        "runConfigData": {},
        "executionMetadata": {"tags": [{"key": key, "value": value} for key, value in tags.items()]},
    }
    answer = graphql(url, LAUNCH_RUN, {"params": params})["data"]["launchRun"]
    assert answer["__typename"] == "LaunchRunSuccess", answer
    return answer["run"]["runId"]


def finished_status(url: str, run_id: str, timeout: float = UI_RUN_S) -> str:
    """The run's status once it has finished, however long the daemon takes to dequeue it."""
    deadline = time.monotonic() + timeout
    while (status := graphql(url, RUN_STATUS, {"id": run_id})["data"]["runOrError"]["status"]) not in FINISHED:
        assert time.monotonic() < deadline, f"run {run_id} still {status} after {timeout} s"
        time.sleep(1)
    return status
