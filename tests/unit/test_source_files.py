"""Sources are checked before anything starts: readable regular files, and never among the files written."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from reverify_assets.errors import InputError, OutputError, ReadError
from reverify_assets.files.jsonl import iter_jsonl, read_row_at
from reverify_assets.files.names import RunFiles
from reverify_assets.files.preflight import check_source_file
from reverify_assets.resume.output_policy import OutputPolicy, check_sources_kept, check_step_sources
from reverify_assets.run.row_source import PairReader


def regular(path: Path) -> Path:
    path.write_text("{}\n")
    return path


def fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def symlink_loop(path: Path) -> Path:
    path.symlink_to(path.with_name("other"))
    path.with_name("other").symlink_to(path)
    return path


def dangling(path: Path) -> Path:
    path.symlink_to(path.with_name("gone.jsonl"))
    return path


def folder(path: Path) -> Path:
    path.mkdir()
    return path


def unreadable_content(path: Path) -> Path:
    # A regular file whose first read fails with EIO: the kernel refuses to read address 0 of a process.
    path.symlink_to("/proc/self/mem")
    return path


@pytest.mark.parametrize(
    ("make", "refused", "cause"),
    [
        (regular, False, None),
        (lambda path: path, True, None),  # not found
        (dangling, True, None),  # a symbolic link to a file not found
        (symlink_loop, True, errno.ELOOP),
        (fifo, True, None),  # a FIFO, which reverify cannot read more than once
        (folder, True, None),
        (unreadable_content, True, errno.EIO),
    ],
    ids=["regular", "missing", "dangling", "loop", "fifo", "folder", "unreadable"],
)
def test_a_source_that_cannot_be_read_is_named(
    tmp_path: Path, make: Callable[[Path], Path], refused: bool, cause: int | None
) -> None:
    path = make(tmp_path / "src.jsonl")
    if not refused:
        check_source_file("--inputs", path)
    else:
        with pytest.raises(InputError) as caught:
            check_source_file("--inputs", path)
        assert (caught.value.path, caught.value.line, caught.value.key) == (path, None, None)
        if cause is not None:
            assert isinstance(caught.value.__cause__, OSError) and caught.value.__cause__.errno == cause


def hard_link(target: Path, link: Path) -> None:
    os.link(target, link)


def soft_link(target: Path, link: Path) -> None:
    link.symlink_to(target)


@pytest.mark.parametrize(
    ("output", "rollouts", "force", "append", "refused"),
    [
        ("o.jsonl", "r.jsonl", False, False, None),
        ("o.jsonl", "o_failures.jsonl", False, False, "o_failures.jsonl"),  # --output's failures sidecar
        ("o.jsonl", "o.jsonl", False, False, "o.jsonl"),  # --output is --rollouts
        ("o.jsonl", "o.jsonl", False, True, None),  # --append completes the run's own rollouts file
        ("r_failures.jsonl", "r.jsonl", False, True, "r_failures.jsonl"),  # --output: the sidecar of --rollouts
        ("o.jsonl", ".o.jsonl.lock", False, False, ".o.jsonl.lock"),  # --output's lock file
        ("o.jsonl", "unsafe_o_failures.jsonl", False, False, None),
        ("o.jsonl", "unsafe_o_failures.jsonl", True, False, "unsafe_o_failures.jsonl"),  # --force's sidecar
        ("i_failures.jsonl", "r.jsonl", False, False, None),
    ],
)
def test_a_file_the_run_writes_may_not_be_a_source(
    tmp_path: Path, output: str, rollouts: str, force: bool, append: bool, refused: str | None
) -> None:
    """``refused``: the file written that is a source, as the error's ``path``."""
    inputs, sources = regular(tmp_path / "i.jsonl"), regular(tmp_path / rollouts)
    if refused is None:
        check_sources_kept(inputs, sources, tmp_path / output, force=force, append=append)
    else:
        with pytest.raises(OutputError) as caught:
            check_sources_kept(inputs, sources, tmp_path / output, force=force, append=append)
        assert caught.value.path == tmp_path / refused


@pytest.mark.parametrize("link", [hard_link, soft_link])
def test_links_to_a_source_are_the_source(tmp_path: Path, link: Callable[[Path, Path], None]) -> None:
    inputs = regular(tmp_path / "i.jsonl")
    rollouts = regular(tmp_path / "r.jsonl")
    (tmp_path / "out").mkdir()
    link(rollouts, tmp_path / "out" / "o_aggregate_metrics.json")
    with pytest.raises(OutputError) as caught:
        check_sources_kept(inputs, rollouts, tmp_path / "out" / "o.jsonl", force=False, append=False)
    assert caught.value.path == tmp_path / "out" / "o_aggregate_metrics.json"
    link(inputs, tmp_path / "out" / "p.jsonl")
    with pytest.raises(OutputError) as caught:
        check_sources_kept(inputs, rollouts, tmp_path / "out" / "p.jsonl", force=False, append=False)
    assert caught.value.path == tmp_path / "out" / "p.jsonl"


UNREADABLE = Path("/proc/self/mem")  # reading at offset 0 fails with EIO: an I/O error, on demand


def test_an_io_error_while_reading_rows_names_the_file(tmp_path: Path) -> None:
    def assert_an_io_error_of_the_file(error: ReadError) -> None:
        assert error.path == UNREADABLE
        assert isinstance(error.__cause__, OSError) and error.__cause__.errno == errno.EIO

    with pytest.raises(ReadError) as caught:
        list(iter_jsonl(UNREADABLE))
    assert_an_io_error_of_the_file(caught.value)
    with open(UNREADABLE, "rb") as fh, pytest.raises(ReadError) as caught:
        read_row_at(fh, 0, UNREADABLE, 1)
    assert_an_io_error_of_the_file(caught.value)
    good = regular(tmp_path / "i.jsonl")
    for inputs, rollouts in ((UNREADABLE, good), (good, UNREADABLE)):
        with PairReader(inputs, rollouts) as pairs, pytest.raises(ReadError) as caught:
            pairs.read_lines((0, 1), (0, 1))
        assert_an_io_error_of_the_file(caught.value)


@pytest.mark.parametrize(
    ("output", "append", "refused"),
    [
        ("o.jsonl", False, False),
        ("r_failures.jsonl", False, True),  # the output is the rows' source
        ("r_failures.jsonl", True, True),
        ("r.jsonl", True, False),  # recovery onto the run's own rollouts: its sidecar is the rows' source
        ("r.jsonl", False, True),  # the output's failures sidecar is the rows' source
    ],
)
def test_the_verify_step_checks_its_sources_too(tmp_path: Path, output: str, append: bool, refused: bool) -> None:
    """What a run launched from the Dagster UI meets, without the CLI's checks: here a judge recovery's."""
    inputs, failures = regular(tmp_path / "i.jsonl"), regular(tmp_path / "r_failures.jsonl")
    files = RunFiles.for_output(tmp_path / output)
    policy = OutputPolicy(append=append)
    if not refused:
        check_step_sources(files, inputs, failures, policy)
    else:
        with pytest.raises(OutputError) as caught:
            check_step_sources(files, inputs, failures, policy)
        assert caught.value.path == failures  # the file written that is the rows' source
