"""Sources are checked before anything starts: readable regular files, and never among the files written."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from reverify_assets.errors import ReverifyError
from reverify_assets.files.jsonl import iter_jsonl, read_row_at
from reverify_assets.files.names import RunFiles
from reverify_assets.files.preflight import check_source_file
from reverify_assets.pipeline.row_source import PairReader
from reverify_assets.resume.output_policy import OutputPolicy, check_sources_kept, check_step_sources


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
    ("make", "message"),
    [
        (regular, None),
        (lambda path: path, r"--inputs file not found: .*src.jsonl$"),
        (dangling, r"--inputs file not found: .*src.jsonl is a symbolic link to .*gone.jsonl"),
        (symlink_loop, r"--inputs file .*src.jsonl cannot be read: Too many levels of symbolic links"),
        (fifo, r"--inputs .*src.jsonl is a FIFO \(named pipe\): reverify reads its sources as regular files"),
        (folder, r"--inputs .*src.jsonl is a directory"),
        (unreadable_content, r"--inputs file .*src.jsonl cannot be read: Input/output error"),
    ],
)
def test_a_source_that_cannot_be_read_is_named(
    tmp_path: Path, make: Callable[[Path], Path], message: str | None
) -> None:
    path = make(tmp_path / "src.jsonl")
    if message is None:
        check_source_file("--inputs", path)
    else:
        with pytest.raises(ReverifyError, match=message):
            check_source_file("--inputs", path)


def hard_link(target: Path, link: Path) -> None:
    os.link(target, link)


def soft_link(target: Path, link: Path) -> None:
    link.symlink_to(target)


@pytest.mark.parametrize(
    ("output", "rollouts", "force", "append", "message"),
    [
        ("o.jsonl", "r.jsonl", False, False, None),
        ("o.jsonl", "o_failures.jsonl", False, False, r"--output's failures sidecar .*o_failures.jsonl is the same"),
        ("o.jsonl", "o.jsonl", False, False, r"--output .*o.jsonl is the same file as --rollouts"),
        ("o.jsonl", "o.jsonl", False, True, None),  # --append completes the run's own rollouts file
        ("r_failures.jsonl", "r.jsonl", False, True, r"--output .* is the same file as the failures sidecar of"),
        ("o.jsonl", ".o.jsonl.lock", False, False, r"--output's lock file"),
        ("o.jsonl", "unsafe_o_failures.jsonl", False, False, None),
        ("o.jsonl", "unsafe_o_failures.jsonl", True, False, r"--force's unsafe_o.jsonl's failures sidecar"),
        ("i_failures.jsonl", "r.jsonl", False, False, None),
    ],
)
def test_a_file_the_run_writes_may_not_be_a_source(
    tmp_path: Path, output: str, rollouts: str, force: bool, append: bool, message: str | None
) -> None:
    inputs, sources = regular(tmp_path / "i.jsonl"), regular(tmp_path / rollouts)
    if message is None:
        check_sources_kept(inputs, sources, tmp_path / output, force=force, append=append)
    else:
        with pytest.raises(ReverifyError, match=message):
            check_sources_kept(inputs, sources, tmp_path / output, force=force, append=append)


@pytest.mark.parametrize("link", [hard_link, soft_link])
def test_links_to_a_source_are_the_source(tmp_path: Path, link: Callable[[Path, Path], None]) -> None:
    inputs = regular(tmp_path / "i.jsonl")
    rollouts = regular(tmp_path / "r.jsonl")
    (tmp_path / "out").mkdir()
    link(rollouts, tmp_path / "out" / "o_aggregate_metrics.json")
    with pytest.raises(ReverifyError, match=r"--output's metrics file .*o_aggregate_metrics.json is the same file as"):
        check_sources_kept(inputs, rollouts, tmp_path / "out" / "o.jsonl", force=False, append=False)
    link(inputs, tmp_path / "out" / "p.jsonl")
    with pytest.raises(ReverifyError, match=r"--output .*p.jsonl is the same file as --inputs .*i.jsonl"):
        check_sources_kept(inputs, rollouts, tmp_path / "out" / "p.jsonl", force=False, append=False)


UNREADABLE = Path("/proc/self/mem")  # reading at offset 0 fails with EIO: an I/O error, on demand


def test_an_io_error_while_reading_rows_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(ReverifyError, match=r"cannot read /proc/self/mem: Input/output error"):
        list(iter_jsonl(UNREADABLE))
    with open(UNREADABLE, "rb") as fh, pytest.raises(ReverifyError, match=r"cannot read /proc/self/mem: Input/out"):
        read_row_at(fh, 0, UNREADABLE, 1)
    good = regular(tmp_path / "i.jsonl")
    for inputs, rollouts in ((UNREADABLE, good), (good, UNREADABLE)):
        with PairReader(inputs, rollouts) as pairs, pytest.raises(ReverifyError, match="cannot read /proc/self/mem"):
            pairs.read_lines((0, 1), (0, 1))


@pytest.mark.parametrize(
    ("output", "append", "message"),
    [
        ("o.jsonl", False, None),
        ("r_failures.jsonl", False, r"the output .*r_failures.jsonl is the same file as the rows' source"),
        ("r_failures.jsonl", True, r"the output .*r_failures.jsonl is the same file as the rows' source"),
        ("r.jsonl", True, None),  # recovery onto the run's own rollouts: its sidecar is the rows' source
        ("r.jsonl", False, r"the output's failures sidecar .* is the same file as the rows' source"),
    ],
)
def test_the_verify_step_checks_its_sources_too(tmp_path: Path, output: str, append: bool, message: str | None) -> None:
    """What a run launched from the Dagster UI meets, without the CLI's checks: here a judge recovery's."""
    inputs, failures = regular(tmp_path / "i.jsonl"), regular(tmp_path / "r_failures.jsonl")
    files = RunFiles.for_output(tmp_path / output)
    policy = OutputPolicy(append=append)
    if message is None:
        check_step_sources(files, inputs, failures, policy)
    else:
        with pytest.raises(ReverifyError, match=message):
            check_step_sources(files, inputs, failures, policy)
