"""``reverify ui`` starts ``dagster dev`` on the CLI's instance: its GraphQL shows the rescoring and its shards, and
a run it launches writes what the command line writes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from reverify_assets.defs.project import SAMPLE, UI_OUTPUT
from reverify_assets.files.names import aggregate_metrics_path, sidecar_path
from tests.support.cli import run_reverify
from tests.support.dagster_ui import finished_status, launch_job, loaded_asset_nodes, running_ui
from tests.support.project import ROOT, make_project

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


def test_a_run_launched_from_the_ui_writes_what_the_command_line_writes(tmp_path: Path) -> None:
    """No command's start-up behind it: the run starts its own server and does its own scans."""
    project, home = make_project(tmp_path, tasks=4), tmp_path / "home"
    shutil.copytree(ROOT / SAMPLE, project.root / SAMPLE)
    ui_output = (project.root / UI_OUTPUT).resolve()
    with running_ui(project.root, home, tmp_path / "ui.log") as url:
        run_id = launch_job(url, "reverify_run", {"dagster/partition": str(ui_output)})
        assert finished_status(url, run_id) == "SUCCESS"
    cli_output = tmp_path / "cli" / "reverified.jsonl"
    samples = project.root / SAMPLE
    ran = run_reverify(
        "run",
        "--config",
        project.root / "configs" / "mcqa.yaml",
        "--inputs",
        samples / "rollouts_materialized_inputs.jsonl",
        "--rollouts",
        samples / "rollouts.jsonl",
        "--output",
        cli_output,
        home=home,
        cwd=project.root,
    )
    assert ran.returncode == 0, ran.stderr
    for name_of in (lambda path: path, sidecar_path, aggregate_metrics_path):
        assert name_of(ui_output).read_bytes() == name_of(cli_output).read_bytes(), name_of(ui_output).name
