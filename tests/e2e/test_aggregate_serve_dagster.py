"""``reverify aggregate`` over shards, ``reverify serve``, Ctrl-C, and what the Dagster instance records."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import dagster as dg
import orjson
import pytest

from reverify_assets.defs.run_tags import COMMAND_TAG
from tests.support.cli import (
    CLI_LIMIT_S,
    CONFORMANCE_ROLLOUTS,
    MCQA_CONFIG,
    REVERIFY,
    ROOT,
    read_jsonl,
    run_args,
    run_mcqa,
    run_reverify,
    start_piped,
    start_reverify,
    write_jsonl,
)
from tests.support.fake_verifier import FakeVerifier
from tests.support.instance import latest_materialization, open_instance
from tests.support.process_tree import ProcessInfo, descendants, kill_all, survivors
from tests.support.waiting import wait_for

pytestmark = pytest.mark.slow
LENIENT = "++mcqa.resources_servers.mcqa.grading_mode=lenient_boxed"


def aggregate_mcqa(input_glob: str, output: Path, *flags: str, home: Path):
    return run_reverify(
        "aggregate", "--config", MCQA_CONFIG, "--input-glob", input_glob, "--output", output, *flags, home=home
    )


def test_sharded_runs_aggregate_to_the_unsharded_metrics(tmp_path: Path) -> None:
    home = tmp_path / "h"
    whole = run_mcqa(tmp_path / "whole.jsonl", LENIENT, home=home)
    assert whole.returncode == 0, whole.stderr
    rows = read_jsonl(CONFORMANCE_ROLLOUTS)
    shards = tmp_path / "shards"
    shards.mkdir()
    # Two shards with tasks split unevenly and out of order, as users split a rollouts file.
    halves = [[r for r in rows if r["_ng_task_index"] % 3 == 0], [r for r in rows if r["_ng_task_index"] % 3 != 0]]
    for number, half in enumerate(halves):
        part = write_jsonl(tmp_path / f"part{number}.jsonl", half)
        done = run_mcqa(shards / f"rs-shard{number}.jsonl", "--disable-aggregation", LENIENT, rollouts=part, home=home)
        assert done.returncode == 0, done.stderr
    merged = tmp_path / "merged.jsonl"
    result = aggregate_mcqa(f"{shards}/rs-shard*.jsonl", merged, LENIENT, home=home)
    assert result.returncode == 0, result.stderr
    assert merged.read_bytes() == (tmp_path / "whole.jsonl").read_bytes()
    ours = orjson.loads((tmp_path / "merged_aggregate_metrics.json").read_bytes())
    reference = orjson.loads((tmp_path / "whole_aggregate_metrics.json").read_bytes())
    assert without_coverage(ours) == without_coverage(reference)
    # The whole run knows its plan; the shards' aggregate does not, and says so instead of claiming 0 missing.
    assert reference[0]["coverage"]["expected"] == 180 and reference[0]["coverage"]["complete"] is True
    assert ours[0]["coverage"] | {"expected": 180, "missing": 0} == reference[0]["coverage"] | {"complete": False}
    assert ours[0]["coverage"]["expected"] == ours[0]["coverage"]["missing"] == "unknown"
    assert "Metrics cover 180 rollouts (expected total unknown)\n" in result.stdout
    # The merged file is named before the metrics file.
    assert 0 <= result.stdout.index(f"Merged:  {merged} (180 rows") < result.stdout.index("Metrics: ")
    # A run of the code location's job, its config the command's: what "Re-execute" in the UI runs again.
    [run] = open_instance(home).get_runs(dg.RunsFilter(tags={COMMAND_TAG: "aggregate"}))
    assert run.job_name == "reverify_aggregate" and run.tags["dagster/partition"] == str(merged)
    assert run.remote_job_origin is not None and run.remote_job_origin.job_name == "reverify_aggregate"
    config = run.run_config["resources"]["shard_aggregate"]["config"]
    assert config["input_glob"] == f"{shards}/rs-shard*.jsonl" and config["output"] == str(merged)
    assert f"Dagster run: {run.run_id}" in result.stdout

    unmerged = tmp_path / "unmerged.jsonl"
    result = aggregate_mcqa(
        f"{shards}/rs-shard1.jsonl,{shards}/*.jsonl", unmerged, LENIENT, "++merge_shards=false", home=home
    )
    assert result.returncode == 0, result.stderr
    assert not unmerged.exists()
    assert orjson.loads((tmp_path / "unmerged_aggregate_metrics.json").read_bytes()) == ours

    # An output that is a link: the file it points at is written, the link stays, and the paths printed are those
    # written.
    (tmp_path / "elsewhere").mkdir()
    target, link = tmp_path / "elsewhere" / "target.jsonl", tmp_path / "link.jsonl"
    link.symlink_to(target)
    result = aggregate_mcqa(f"{shards}/rs-shard*.jsonl", link, LENIENT, home=home)
    assert result.returncode == 0, result.stderr
    assert link.is_symlink() and target.read_bytes() == merged.read_bytes()
    printed = dict(
        line.split(maxsplit=1) for line in result.stdout.splitlines() if line.startswith(("Merged:", "Metrics:"))
    )
    assert printed["Merged:"] == f"{target} (180 rows, sorted by key)"
    assert printed["Metrics:"] == str(tmp_path / "elsewhere" / "target_aggregate_metrics.json")
    assert Path(printed["Metrics:"]).exists()


def without_coverage(entries: list[dict]) -> list[dict]:
    """NeMo Gym's fields and our provenance block: what the same rows give however they were split."""
    return [{name: value for name, value in entry.items() if name != "coverage"} for entry in entries]


def test_aggregate_refuses_shards_scored_by_different_configs_unless_allowed(tmp_path: Path) -> None:
    home = tmp_path / "h"
    rows = read_jsonl(CONFORMANCE_ROLLOUTS)
    shards = tmp_path / "shards"
    shards.mkdir()
    modes = ["lenient_boxed", "strict_single_letter_boxed"]
    for number, mode in enumerate(modes):
        part = write_jsonl(tmp_path / f"part{number}.jsonl", [r for r in rows if r["_ng_task_index"] % 2 == number])
        done = run_mcqa(
            shards / f"rs-shard{number}.jsonl",
            "--disable-aggregation",
            f"++mcqa.resources_servers.mcqa.grading_mode={mode}",
            rollouts=part,
            home=home,
        )
        assert done.returncode == 0, done.stderr
    paths = [shards / f"rs-shard{number}.jsonl" for number in range(2)]
    hashes = [read_jsonl(path)[0]["reverify_provenance"]["config_hash"] for path in paths]
    counts = [len(read_jsonl(path)) for path in paths]
    assert hashes[0] != hashes[1], "two grading modes are two verifier configs"

    merged = tmp_path / "merged.jsonl"
    refused = aggregate_mcqa(f"{shards}/rs-shard*.jsonl", merged, home=home)
    assert refused.returncode == 1, refused.stderr
    assert "2 different verifier configs" in refused.stderr and "--allow-mixed-configs" in refused.stderr
    for config, count, path in zip(hashes, counts, paths, strict=True):
        assert f"config {config} ({count} rows, e.g. {path})" in refused.stderr
    assert not merged.exists() and not (tmp_path / "merged_aggregate_metrics.json").exists()

    allowed = aggregate_mcqa(f"{shards}/rs-shard*.jsonl", merged, "--allow-mixed-configs", home=home)
    assert allowed.returncode == 0, allowed.stderr
    assert "WARNING: --allow-mixed-configs: aggregating rows of 2 verifier configs" in allowed.stderr
    [entry] = orjson.loads((tmp_path / "merged_aggregate_metrics.json").read_bytes())
    assert entry["provenance"] == {"rows_by_config": dict(zip(hashes, counts, strict=True)), "mixed": True}
    assert "the metrics mix rows scored by 2 verifier configs" in allowed.stdout

    # Rows without provenance (scored before reverify) are a config of their own: mixed with one, refused.
    write_jsonl(paths[1], [{k: v for k, v in r.items() if k != "reverify_provenance"} for r in read_jsonl(paths[1])])
    unknown = aggregate_mcqa(f"{shards}/rs-shard*.jsonl", tmp_path / "m2.jsonl", home=home)
    assert unknown.returncode == 1, unknown.stderr
    assert f"rows without reverify_provenance ('original') ({counts[1]} rows, e.g. {paths[1]})" in unknown.stderr


def test_aggregate_into_a_pipe_closed_early_still_writes_its_files(tmp_path: Path) -> None:
    home = tmp_path / "h"
    done = run_mcqa(tmp_path / "out.jsonl", "--disable-aggregation", LENIENT, home=home)
    assert done.returncode == 0, done.stderr
    reader, writer = os.pipe()
    os.close(reader)  # as `| head` does once it has its lines
    process = start_reverify(
        *("aggregate", "--config", MCQA_CONFIG, "-i", tmp_path / "out.jsonl", "-o", tmp_path / "merged.jsonl"),
        LENIENT,
        home=home,
        stdout=writer,
        stderr=subprocess.PIPE,
    )
    os.close(writer)
    _, stderr = process.communicate(timeout=CLI_LIMIT_S)
    assert process.returncode == 0, stderr
    assert b"Traceback" not in stderr
    assert orjson.loads((tmp_path / "merged_aggregate_metrics.json").read_bytes())[0]["coverage"]["scored"] == 180


def test_shards_not_merged_whose_rows_name_no_agent_aggregate_to_nothing_written(tmp_path: Path) -> None:
    rows = [{"_ng_task_index": task, "_ng_rollout_index": 0, "reward": 1.0} for task in range(3)]
    write_jsonl(tmp_path / "shard-0.jsonl", rows)
    glob, output = f"{tmp_path}/shard-*.jsonl", tmp_path / "m.jsonl"
    result = aggregate_mcqa(glob, output, "++merge_shards=false", "--no-health-check", home=tmp_path / "h")
    assert result.returncode == 0, result.stderr
    assert "No row carries an agent name: no metrics written." in result.stdout
    assert not (tmp_path / "m.jsonl").exists()


def test_aggregate_with_no_matching_shard_is_an_error(tmp_path: Path) -> None:
    result = aggregate_mcqa(f"{tmp_path}/none*.jsonl", tmp_path / "m.jsonl", home=tmp_path / "h")
    assert result.returncode == 1
    assert "No shards matched" in result.stderr


def test_serve_runs_the_configured_server_until_interrupted(tmp_path: Path) -> None:
    process = subprocess.Popen([REVERIFY, "serve", "--config", str(MCQA_CONFIG)], stdout=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline()
        assert "mcqa (mcqa) listening on http://127.0.0.1:" in line
        url = line.split()[-1]
        with urllib.request.urlopen(f"{url}/reverify_mode", timeout=5) as reply:
            assert orjson.loads(reply.read()) == "stateless"
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=CLI_LIMIT_S) == 0


def test_serve_answers_on_a_blocks_port_in_front_of_its_copies(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port free a moment ago: the server binds it at once
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    block = "++mcqa.resources_servers.mcqa"
    argv = [REVERIFY, "serve", "--config", str(MCQA_CONFIG), f"{block}.port={port}", f"{block}.replicas=2"]
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline()
        assert f"mcqa (mcqa) listening on http://127.0.0.1:{port} (2 copies)" in line
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/reverify_mode", timeout=CLI_LIMIT_S) as reply:
            assert orjson.loads(reply.read()) == "stateless"
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=CLI_LIMIT_S) == 0


def test_ctrl_c_stops_the_started_server(tmp_path: Path) -> None:
    inputs = write_jsonl(
        tmp_path / "i.jsonl",
        [
            {
                "_ng_task_index": t,
                "_ng_rollout_index": 0,
                "agent_ref": {"name": "a"},
                "options": [{"A": "x"}],
                "expected_answer": "A",
                "responses_create_params": {"input": "q"},
            }
            for t in range(3)
        ],
    )
    rollouts = write_jsonl(
        tmp_path / "r.jsonl",
        [{"_ng_task_index": t, "_ng_rollout_index": 0, "response": {"output": []}} for t in range(3)],
    )
    # A url server that never answers keeps the run busy while the built-in one is alive.
    config = tmp_path / "two.yaml"
    with FakeVerifier(latency_s=60) as slow:
        config.write_text(
            "mcqa:\n  resources_servers:\n    mcqa: {}\n"
            f"slow:\n  resources_servers:\n    x:\n      url: {slow.url}\n"
            "a:\n  responses_api_agents:\n    simple_agent:\n      resources_server: {name: slow}\n"
            "b:\n  responses_api_agents:\n    simple_agent:\n      resources_server: {name: mcqa}\n"
        )
        process = start_piped(*run_args(config, inputs, rollouts, tmp_path / "o.jsonl"), home=tmp_path / "h")
        tree: list[ProcessInfo] = []
        try:
            wait_for(lambda: slow.stats.verify_calls > 0, "reached the verify step", process)
            tree = descendants(process.pid)
            assert any("reverify_assets.servers.child_process" in child.command for child in tree)
            process.send_signal(signal.SIGINT)
            process.communicate(timeout=CLI_LIMIT_S)
            left = survivors(tree, within=CLI_LIMIT_S)
        finally:
            kill_all(tree)
    assert process.returncode != 0
    assert left == []


def test_cli_runs_are_dagster_materializations_with_lineage_metadata(tmp_path: Path) -> None:
    home = tmp_path / "h"
    result = run_mcqa(tmp_path / "rs.jsonl", LENIENT, home=home)
    assert result.returncode == 0, result.stderr
    instance = open_instance(home)
    rows, _ = latest_materialization(instance, "reverified_rows")
    assert rows["rows"] == 180 and rows["mean reward"] == pytest.approx(0.45)
    assert rows["file"].endswith("rs.jsonl") and len(rows["verifier config hash"]) == 12
    assert rows["failures by class"] == {}
    for name in [
        "materialized_inputs",
        "rollouts",
        "verify_payloads",
        "reverified_rows",
        "reverify_failures",
        "aggregate_metrics",
    ]:
        _, tags = latest_materialization(instance, name)
        assert "dagster/data_version" in tags, name
    metrics, _ = latest_materialization(instance, "aggregate_metrics")
    assert "pass@1[avg-of-3]/accuracy" in metrics["key metrics"]
    coverage = metrics["coverage"]
    assert coverage.startswith("**mcqa_simple_agent**") and "| scored | 180 of 180 |" in coverage, coverage
    assert "| failed | none |" in coverage and "| mean, lost rows as 0 | 0.4500 |" in coverage, coverage
    assert metrics["complete"] is True and metrics["metrics cover"] == "180 of 180 rollouts"


def test_definitions_validate(tmp_path: Path) -> None:
    dagster = Path(sys.executable).parent / "dagster"
    result = subprocess.run(
        [str(dagster), "definitions", "validate", "-w", "workspace.yaml"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "DAGSTER_HOME": str(tmp_path)},
    )
    assert result.returncode == 0, result.stdout + result.stderr
