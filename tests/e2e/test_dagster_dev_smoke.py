"""``reverify ui`` starts ``dagster dev`` on the CLI's instance: its GraphQL shows the rescoring and its shards."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from tests.support.cli import run_reverify
from tests.support.dagster_ui import loaded_asset_nodes, start_ui
from tests.support.postgres import free_port
from tests.support.process_tree import descendants, kill_all
from tests.support.project import make_project

pytestmark = pytest.mark.slow


def test_ui_serves_the_rescoring_assets_and_partitions(tmp_path: Path) -> None:
    project, home = make_project(tmp_path, tasks=20), tmp_path / "home"
    assert run_reverify("shards", project.name, home=home, cwd=project.root).returncode == 0
    port = free_port()
    ui = start_ui(project.root, home, port, subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        assert f"Dagster UI for DAGSTER_HOME={home.resolve()}: {url}" in ui.stdout.readline()
        answer = loaded_asset_nodes(url)
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
        tree = descendants(ui.pid)
        os.killpg(ui.pid, signal.SIGINT)
        try:
            ui.wait(timeout=30)
        except subprocess.TimeoutExpired:
            ui.kill()
            ui.wait()
        kill_all(tree)
