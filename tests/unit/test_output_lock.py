"""One writer per output: another process holding it is named by PID; a dead holder's lock is taken over."""

from __future__ import annotations

import errno
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from reverify_assets.errors import InputError, OutputError, StateError
from reverify_assets.files.names import lock_path
from reverify_assets.files.output_lock import HeldOutputs, exclusive_output
from tests.support.cli import MCQA_CONFIG, run_reverify
from tests.support.instance import open_instance
from tests.support.small_disk import mounted_tmpfs

HOLD = """
import sys
from pathlib import Path
from reverify_assets.files.output_lock import exclusive_output
with exclusive_output(Path(sys.argv[1])):
    print("held", flush=True)
    sys.stdin.read()
"""


@contextmanager
def held_elsewhere(output: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process holding ``output``'s lock for the block."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(output)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        yield holder
    finally:
        if holder.poll() is None:
            holder.communicate("", timeout=120)


def test_a_second_process_is_refused_naming_the_holders_pid(tmp_path: Path) -> None:
    output = tmp_path / "o.jsonl"
    with held_elsewhere(output) as holder:
        with pytest.raises(StateError) as caught:
            with exclusive_output(output):
                pass
    assert caught.value.path == output
    assert f"another run with PID {holder.pid} is writing" in str(caught.value)
    with exclusive_output(output):  # released when the holder ends
        assert lock_path(output).read_text() == f"{os.getpid()}\n"
    assert not lock_path(output).exists()  # released on purpose: nothing for the next run to take over


def test_the_lock_of_a_dead_run_is_taken_over_with_a_notice(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    output = tmp_path / "o.jsonl"
    with held_elsewhere(output) as holder:
        holder.kill()
        holder.wait(timeout=120)
    with caplog.at_level(logging.WARNING, logger="reverify"), exclusive_output(output):
        pass
    assert f"taking over {lock_path(output)}, left by PID {holder.pid}, which is no longer running" in caplog.text


def test_the_steps_of_the_commands_run_write_under_the_lock_it_holds(tmp_path: Path) -> None:
    output, other = tmp_path / "o.jsonl", tmp_path / "p.jsonl"
    held = HeldOutputs()
    with held.hold(output):
        with exclusive_output(output, held):
            pass
        assert lock_path(output).read_text() == f"{os.getpid()}\n"  # still held by the command
        with exclusive_output(other, held):  # an output the command does not hold: locked as any other
            assert lock_path(other).exists()
        assert not lock_path(other).exists()
    assert output not in held and not lock_path(output).exists()


def test_a_step_not_handed_the_commands_locks_is_refused_its_output(tmp_path: Path) -> None:
    output = tmp_path / "o.jsonl"
    with HeldOutputs().hold(output), pytest.raises(StateError) as caught, exclusive_output(output):
        pass
    assert caught.value.path == output


def test_a_folder_the_lock_made_is_removed_with_it_unless_the_run_wrote_there(tmp_path: Path) -> None:
    data_error = InputError("a data error", path=tmp_path / "i.jsonl", line=3)
    with pytest.raises(InputError) as caught:
        with exclusive_output(tmp_path / "new" / "o.jsonl"):
            raise data_error
    assert caught.value is data_error
    assert not (tmp_path / "new").exists()
    with exclusive_output(tmp_path / "new" / "o.jsonl"):
        (tmp_path / "new" / "o.jsonl").write_text("{}\n")
    assert [p.name for p in (tmp_path / "new").iterdir()] == ["o.jsonl"]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to mount a read-only file system")
def test_a_read_only_folder_is_a_clear_error(tmp_path: Path) -> None:
    with mounted_tmpfs(tmp_path / "ro", "ro,size=1m") as folder:
        with pytest.raises(OutputError) as caught:
            with exclusive_output(folder / "o.jsonl"):
                pass
    assert caught.value.path == folder
    assert isinstance(caught.value.__cause__, OSError) and caught.value.__cause__.errno == errno.EROFS


def test_two_names_of_one_file_share_its_lock(tmp_path: Path) -> None:
    real = tmp_path / "real" / "o.jsonl"
    real.parent.mkdir()
    real.write_text("")
    alias = tmp_path / "alias.jsonl"
    alias.symlink_to(real)
    with held_elsewhere(real) as holder:
        with pytest.raises(StateError) as caught:
            with exclusive_output(alias):
                pass
    assert caught.value.path == alias
    assert f"another run with PID {holder.pid} is writing" in str(caught.value)


def test_aggregate_is_refused_while_a_run_writes_its_output(tmp_path: Path) -> None:
    output = tmp_path / "o.jsonl"
    output.write_text("")
    with held_elsewhere(output) as holder:
        done = run_reverify("aggregate", "--config", MCQA_CONFIG, "-i", output, "-o", output, home=tmp_path / "h")
    assert done.returncode == 1 and f"another run with PID {holder.pid} is writing" in done.stderr, done.stderr
    # Refused before it started: no failed run is left in the instance.
    home = tmp_path / "h"
    assert not home.exists() or open_instance(home).get_runs() == []
