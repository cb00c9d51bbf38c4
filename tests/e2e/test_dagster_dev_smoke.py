"""``reverify ui`` starts ``dagster dev`` on the CLI's instance: its GraphQL shows the rescoring and its shards."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import run_reverify
from tests.support.dagster_ui import loaded_asset_nodes, running_ui
from tests.support.project import make_project

pytestmark = pytest.mark.slow


def test_ui_serves_the_rescoring_assets_and_partitions(tmp_path: Path) -> None:
    project, home = make_project(tmp_path, tasks=20), tmp_path / "home"
    assert run_reverify("shards", project.name, home=home, cwd=project.root).returncode == 0
    log = tmp_path / "ui.log"
    with running_ui(project.root, home, log) as url:
        assert f"Dagster UI for DAGSTER_HOME={home.resolve()}: {url}" in log.read_text().splitlines()[0]
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
