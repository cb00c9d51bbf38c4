"""A full disk or a read-only folder under the output: a clear error, whole lines, and --resume finishes the run.

Each test mounts a small tmpfs of its own (root only, as CI runs).
"""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from tests.support.cli import fake_dataset, read_jsonl, run_args, run_reverify, start_piped, url_config
from tests.support.fake_verifier import FakeVerifier
from tests.support.small_disk import mounted_tmpfs
from tests.support.waiting import CLI_LIMIT_S, HeldAggregation, wait_for

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small file system needs root")


class SmallDisk:
    def __init__(self, path: Path) -> None:
        self.path = path

    def resize(self, size: str, *extra: str) -> None:
        subprocess.run(["mount", "-o", ",".join(["remount", f"size={size}", *extra]), str(self.path)], check=True)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[SmallDisk]:
    with mounted_tmpfs(tmp_path / "disk", "size=256k") as folder:
        yield SmallDisk(folder)


def assert_clear_error(result: subprocess.CompletedProcess[str], path: Path, reason: str) -> None:
    assert result.returncode == 1, result.stderr
    assert f"cannot write {path}" in result.stderr and reason in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def whole_lines(path: Path) -> list[dict]:
    content = path.read_bytes()
    assert not content or content.endswith(b"\n"), "the output ends in a torn line"
    return read_jsonl(path)


def test_a_disk_that_fills_while_verifying_keeps_whole_lines_and_resume_finishes(
    tmp_path: Path, small_disk: SmallDisk
) -> None:
    inputs, rollouts = fake_dataset(tmp_path, ["ok", "wrong"] * 500)  # 2,000 rows, about 600 kB of output
    output = small_disk.path / "o.jsonl"
    with FakeVerifier() as server:
        config = url_config(tmp_path, server.url)
        full = run_reverify(*run_args(config, inputs, rollouts, output), home=tmp_path / "h", timeout=CLI_LIMIT_S)
        assert_clear_error(full, output, "No space left on device")
        assert "run the same command with --resume to finish" in full.stderr
        kept = whole_lines(output)
        assert 0 < len(kept) < 2000
        assert not (small_disk.path / "o_aggregate_metrics.json").exists()
        small_disk.resize("16m")
        resumed = run_reverify(
            *run_args(config, inputs, rollouts, output, "--resume"), home=tmp_path / "h", timeout=CLI_LIMIT_S
        )
    assert resumed.returncode == 0, resumed.stderr
    rows = {(row["_ng_task_index"], row["_ng_rollout_index"]): row for row in whole_lines(output)}
    assert len(rows) == 2000  # every key once
    assert all(rows[(row["_ng_task_index"], row["_ng_rollout_index"])] == row for row in kept)
    assert "Mean reward: 0.5000" in resumed.stdout


def test_no_room_for_the_metrics_keeps_the_output_and_writes_no_partial_metrics(
    tmp_path: Path, small_disk: SmallDisk
) -> None:
    inputs, rollouts = fake_dataset(tmp_path, ["ok", "wrong"] * 20)
    output = small_disk.path / "o.jsonl"
    filler = small_disk.path / "filler"
    with HeldAggregation() as server:
        config = url_config(tmp_path, server.url)
        run = start_piped(*run_args(config, inputs, rollouts, output), home=tmp_path / "h")
        try:
            wait_for(server.aggregating.is_set, "reached its aggregation", run)
            _fill(filler)
        finally:
            server.release.set()
            out, err = run.communicate(timeout=CLI_LIMIT_S)
        metrics = small_disk.path / "o_aggregate_metrics.json"
        assert_clear_error(subprocess.CompletedProcess(run.args, run.returncode, out, err), metrics, "No space left")
        assert len(whole_lines(output)) == 80
        assert sorted(path.name for path in small_disk.path.iterdir()) == ["filler", "o.jsonl", "o_failures.jsonl"]
        filler.unlink()
        resumed = run_reverify(
            *run_args(config, inputs, rollouts, output, "--resume"), home=tmp_path / "h", timeout=CLI_LIMIT_S
        )
    assert resumed.returncode == 0, resumed.stderr
    assert "Nothing to be re-verified" in resumed.stderr
    assert orjson.loads(metrics.read_bytes())[0]["coverage"]["scored"] == 80


@pytest.mark.parametrize("flags", [(), ("--overwrite",), ("--resume",)])
def test_a_read_only_output_folder_is_a_clear_error_that_changes_nothing(
    tmp_path: Path, small_disk: SmallDisk, flags: tuple[str, ...]
) -> None:
    inputs, rollouts = fake_dataset(tmp_path, ["ok", "wrong"] * 5)
    written = small_disk.path / "earlier.jsonl"
    written.write_bytes(b'{"_ng_task_index": 0, "_ng_rollout_index": 0, "reward": 1.0}\n')
    output = written if flags else small_disk.path / "new.jsonl"
    small_disk.resize("256k", "ro")
    with FakeVerifier() as server:
        result = run_reverify(
            *run_args(url_config(tmp_path, server.url), inputs, rollouts, output, *flags),
            home=tmp_path / "h",
            timeout=CLI_LIMIT_S,
        )
        assert server.stats.verify_calls == 0
    assert result.returncode == 1, result.stderr
    assert f"cannot write the output's folder {small_disk.path}: Read-only file system" in result.stderr
    assert "Traceback" not in result.stderr
    assert [path.name for path in small_disk.path.iterdir()] == ["earlier.jsonl"]


def _fill(path: Path) -> None:
    """Write until the file system has no room left."""
    with open(path, "wb", buffering=0) as fh:
        try:
            while True:
                fh.write(b"\0" * 4096)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
