"""Ctrl-C, SIGTERM and SIGKILL at every phase of ``reverify run``, and of ``reverify ui`` and ``reverify serve``.

Each signal goes to the CLI's process group, as a terminal sends Ctrl-C (the CLI leads a session of its own here,
as a shell's foreground job leads its group), once a condition proves the phase was reached. The CLI must exit
128 + the signal's number with one "interrupted" line and no traceback (its children's included), leave no child
running 2 s later and no start-up folder, and ``--resume`` must then finish the run with every key once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

import pytest

from reverify_assets.defs.dagster_internals import BulkActionStatus
from reverify_assets.synthetic.mcqa_rollouts import SyntheticSpec, write_mcqa_dataset
from tests.support.cli import MCQA_CONFIG, REVERIFY, read_jsonl, reverify_env, row_keys, run_args, run_reverify
from tests.support.dagster_ui import loaded_asset_nodes, start_ui
from tests.support.instance import open_instance
from tests.support.postgres import free_port
from tests.support.process_tree import ProcessInfo, descendants, kill_all, survivors, wait_until
from tests.support.project import make_project

pytestmark = pytest.mark.slow
# Rows enough that each phase lasts a while (the key scans a few tenths of a second), and that the aggregation
# reads the output in a process of its own (above 32 MB), whose presence proves the phase.
TASKS, ROLLOUTS_PER_TASK = 5000, 4
ROWS = TASKS * ROLLOUTS_PER_TASK
# How long a child may outlive the CLI, and `reverify ui` or `serve` take to stop everything they started.
OUTLIVES_S = 2.0
STOPS_S = 10.0


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    spec = SyntheticSpec(tasks=TASKS, rollouts_per_task=ROLLOUTS_PER_TASK)
    return write_mcqa_dataset(tmp_path_factory.mktemp("data"), spec)


def _running(module: str) -> Callable[[subprocess.Popen[str], Path], bool]:
    def reached(cli: subprocess.Popen[str], output: Path) -> bool:
        return any(module in process.command for process in descendants(cli.pid))

    return reached


def _rows_written(cli: subprocess.Popen[str], output: Path) -> bool:
    return output.exists() and output.stat().st_size > 0


PHASES = {
    "start-up": _running("reverify_assets.keys.scan_process"),  # servers starting, the keys being scanned
    "verify": _rows_written,
    "aggregation": _running("reverify_assets.run.aggregation_rows_process"),
}


def _start_run(inputs: Path, rollouts: Path, output: Path, home: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [REVERIFY, *map(str, run_args(MCQA_CONFIG, inputs, rollouts, output))],
        env=reverify_env(home),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _tree_at(phase: str, cli: subprocess.Popen[str], output: Path) -> list[ProcessInfo]:
    """The CLI's descendants, once ``phase`` is reached."""
    assert wait_until(lambda: PHASES[phase](cli, output), timeout=600, poll_s=0.005), f"never reached the {phase}"
    return descendants(cli.pid)


def _reap(cli: subprocess.Popen[str], tree: list[ProcessInfo]) -> None:
    if cli.poll() is None:
        cli.kill()
        cli.wait()
    kill_all(tree)


def _start_up_folders(home: Path) -> list[Path]:
    return list((home / "reverify_work").glob("start-up-*"))


def _resume_finishes(inputs: Path, rollouts: Path, output: Path, home: Path) -> None:
    resumed = run_reverify(*run_args(MCQA_CONFIG, inputs, rollouts, output, "--resume"), home=home, timeout=900)
    assert resumed.returncode == 0, resumed.stderr
    keys = row_keys(read_jsonl(output))
    assert len(keys) == len(set(keys)) == ROWS


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("phase", PHASES)
def test_a_signal_in_any_phase_is_an_interruption_that_leaves_nothing_behind(
    tmp_path: Path, dataset: tuple[Path, Path], phase: str, signum: signal.Signals
) -> None:
    inputs, rollouts = dataset
    home, output = tmp_path / "home", tmp_path / "o.jsonl"
    cli = _start_run(inputs, rollouts, output, home)
    tree: list[ProcessInfo] = []
    try:
        tree = _tree_at(phase, cli, output)
        os.killpg(cli.pid, signum)
        _, stderr = cli.communicate(timeout=120)
        left = survivors(tree, within=OUTLIVES_S)
    finally:
        _reap(cli, tree)
    assert cli.returncode == 128 + signum, stderr
    assert "Traceback" not in stderr, stderr
    assert stderr.splitlines()[-1].startswith("reverify: interrupted"), stderr
    assert left == [], f"outlived the CLI by {OUTLIVES_S} s: {left}"
    assert _start_up_folders(home) == []
    _resume_finishes(inputs, rollouts, output, home)


def test_sigkill_in_the_start_up_leaves_no_child_and_no_start_up_folder(
    tmp_path: Path, dataset: tuple[Path, Path]
) -> None:
    """Nothing of the CLI runs after SIGKILL: its scans, still running, remove the start-up folder (had they been
    done, the next start-up would)."""
    inputs, rollouts = dataset
    home, output = tmp_path / "home", tmp_path / "o.jsonl"
    cli = _start_run(inputs, rollouts, output, home)
    tree: list[ProcessInfo] = []
    try:
        tree = _tree_at("start-up", cli, output)
        cli.kill()
        cli.wait()
        left = survivors(tree, within=OUTLIVES_S)
        assert left == [], f"outlived the CLI by {OUTLIVES_S} s: {left}"
        assert wait_until(lambda: not _start_up_folders(home), timeout=OUTLIVES_S)
    finally:
        _reap(cli, tree)
    _resume_finishes(inputs, rollouts, output, home)


def _stopped_within(command: subprocess.Popen[str], tree: list[ProcessInfo], seconds: float) -> list[ProcessInfo]:
    """What of ``tree`` still runs ``seconds`` after now, the command itself included."""
    deadline = time.monotonic() + seconds
    try:
        command.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        pass
    return survivors(tree, within=max(0.0, deadline - time.monotonic()))


def _signalled(
    command: subprocess.Popen[str], ready: Callable[[], object], signum: signal.Signals, to_group: bool, log: IO[str]
) -> tuple[list[ProcessInfo], str]:
    """Once ``ready()``: ``signum`` to ``command`` (its process group, or itself alone); what of its processes still
    ran ``STOPS_S`` seconds later, and what it printed."""
    tree: list[ProcessInfo] = []
    try:
        assert ready(), f"{command.args} was never ready"
        tree = descendants(command.pid)
        (os.killpg if to_group else os.kill)(command.pid, signum)
        left = _stopped_within(command, tree, STOPS_S)
    finally:
        _reap(command, tree)
    log.seek(0)
    return left, log.read()


SIGNALLED_BY = pytest.mark.parametrize(
    ("signum", "to_group"), [(signal.SIGINT, True), (signal.SIGTERM, False)], ids=["Ctrl-C", "kill PID"]
)


@SIGNALLED_BY
def test_ui_stops_every_process_it_started_within_10_s(tmp_path: Path, signum: signal.Signals, to_group: bool) -> None:
    project, home, port = make_project(tmp_path, tasks=20), tmp_path / "home", free_port()

    def serving() -> bool:
        started = [process.command for process in descendants(ui.pid)]
        everyone = all(any(name in command for command in started) for name in ("dagster_webserver", "_daemon"))
        return everyone and loaded_asset_nodes(f"http://127.0.0.1:{port}") is not None

    with open(tmp_path / "ui.log", "w+") as log:
        ui = start_ui(project.root, home, port, log)
        left, said = _signalled(ui, lambda: wait_until(serving, timeout=300, poll_s=1), signum, to_group, log)
    assert left == [] and ui.returncode == 128 + signum, f"still running after {STOPS_S} s: {left}\n{said}"
    assert said.splitlines()[-1].startswith("reverify: interrupted"), said


def test_ui_killed_outright_leaves_nothing_running_within_10_s(tmp_path: Path) -> None:
    """dagster dev runs out of the terminal's group: killed, the CLI relays nothing, so the kernel does."""
    project, home, port = make_project(tmp_path, tasks=20), tmp_path / "home", free_port()

    def serving() -> bool:
        return loaded_asset_nodes(f"http://127.0.0.1:{port}") is not None

    with open(tmp_path / "ui.log", "w+") as log:
        ui = start_ui(project.root, home, port, log)
        left, said = _signalled(ui, lambda: wait_until(serving, timeout=300, poll_s=1), signal.SIGKILL, False, log)
    assert left == [], f"still running {STOPS_S} s after the CLI was killed: {left}\n{said}"


def _servers_of(serve: subprocess.Popen[str]) -> list[ProcessInfo]:
    return [process for process in descendants(serve.pid) if "reverify_assets.servers.child_process" in process.command]


@SIGNALLED_BY
def test_serve_stops_every_server_within_10_s(tmp_path: Path, signum: signal.Signals, to_group: bool) -> None:
    config = tmp_path / "copies.yaml"
    config.write_text("mcqa:\n  resources_servers:\n    mcqa:\n      entrypoint: app.py\n      replicas: 2\n")
    with open(tmp_path / "serve.log", "w+") as log:
        serve = subprocess.Popen(
            [REVERIFY, "serve", "--config", str(config)],
            env=reverify_env(tmp_path / "home"),
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )

        def both_copies() -> bool:
            return wait_until(lambda: len(_servers_of(serve)) == 2, timeout=120)

        left, said = _signalled(serve, both_copies, signum, to_group, log)
    assert left == [] and serve.returncode == 0, f"still running after {STOPS_S} s: {left}\n{said}"
    assert "servers stopped" in said and "Traceback" not in said, said


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_a_parallel_backfill_stopped_leaves_no_worker_behind(tmp_path: Path, signum: signal.Signals) -> None:
    """Each run of ``backfill --parallel`` is busy with a shard, its servers running: killed, the kernel stops
    them with the CLI (a killed backfill's workers once ran on for 35 minutes); sent SIGTERM (to the CLI alone,
    which the runs, in process groups of their own, do not get), the CLI cancels the backfill, stops them and
    runs none of the shards still queued."""
    # 4 shards of 20,000 rows: a run's servers live for seconds (a 1.7 s start-up per run, then its verify step).
    project = make_project(tmp_path, tasks=20_000)
    project.write_rescoring(shard_tasks=5000)
    cli = subprocess.Popen(
        [REVERIFY, "backfill", project.name, "--parallel", "2"],
        cwd=project.root,
        env=reverify_env(tmp_path / "home"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    tree: list[ProcessInfo] = []
    try:
        assert wait_until(lambda: len(_servers_of(cli)) == 2, timeout=600), "the two workers never started servers"
        tree = descendants(cli.pid)
        cli.send_signal(signum)
        _, stderr = cli.communicate(timeout=600)
        left = survivors(tree, within=OUTLIVES_S)
    finally:
        _reap(cli, tree)
    assert left == [], f"outlived the CLI by {OUTLIVES_S} s: {left}"
    if signum == signal.SIGTERM:
        assert cli.returncode == 128 + signum and "Traceback" not in stderr, stderr
        assert "canceling backfill" in stderr, stderr
        with open_instance(tmp_path / "home") as instance:
            [backfill] = instance.get_backfills()
            runs = instance.get_runs()
        assert backfill.status == BulkActionStatus.CANCELED, backfill
        assert not [run for run in runs if not run.is_finished], runs
