"""``reverify ui`` starts ``dagster dev`` on the CLI's instance: its GraphQL shows the rescoring and its shards."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import orjson
import pytest

from tests.support.cli import REVERIFY, run_reverify
from tests.support.project import make_project

pytestmark = pytest.mark.slow
QUERY = """{ assetNodes { assetKey { path } groupName isPartitioned partitionKeysByDimension { partitionKeys } } }"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def graphql(url: str, query: str) -> dict:
    request = urllib.request.Request(
        f"{url}/graphql", data=orjson.dumps({"query": query}), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as reply:
        return orjson.loads(reply.read())


def test_ui_serves_the_rescoring_assets_and_partitions(tmp_path: Path) -> None:
    project, home = make_project(tmp_path, tasks=20), tmp_path / "home"
    assert run_reverify("shards", project.name, home=home, cwd=project.root).returncode == 0
    port = free_port()
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    ui = subprocess.Popen(
        [REVERIFY, "ui", "--port", str(port)],
        cwd=project.root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        assert f"Dagster UI for DAGSTER_HOME={home.resolve()}: {url}" in ui.stdout.readline()
        deadline, answer = time.monotonic() + 120, None
        while time.monotonic() < deadline:
            try:
                answer = graphql(url, QUERY)
                if answer.get("data", {}).get("assetNodes"):
                    break
            except OSError:
                pass
            time.sleep(1)
        assert answer and answer.get("data"), f"dagster dev never answered GraphQL: {answer}"
        nodes = {"/".join(n["assetKey"]["path"]): n for n in answer["data"]["assetNodes"]}
        assert {
            "bench/shard_payloads",
            "bench/reverified_shard",
            "bench/shard_failures",
            "bench/aggregate_metrics",
            "reverified_rows",
            "merged_rollouts",
        } <= set(nodes)
        shard = nodes["bench/reverified_shard"]
        assert shard["groupName"] == "bench" and shard["isPartitioned"]
        assert shard["partitionKeysByDimension"][0]["partitionKeys"] == ["main.s00000", "main.s00001"]
    finally:
        os.killpg(ui.pid, signal.SIGINT)
        try:
            ui.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(ui.pid, signal.SIGKILL)
            ui.wait()
