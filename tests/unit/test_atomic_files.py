"""Files moved into place: renamed on one file system, copied under a temporary name across two."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from reverify_assets.files import atomic as atomic_files
from reverify_assets.files.atomic import move_into_place


@pytest.mark.parametrize("across_file_systems", [False, True])
def test_move_into_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, across_file_systems: bool) -> None:
    source, target = tmp_path / "a" / "index.parquet", tmp_path / "b" / "index.parquet"
    source.parent.mkdir()
    target.parent.mkdir()
    source.write_bytes(b"rows")
    target.write_bytes(b"older")
    renames: list[tuple[str, str]] = []
    replace = os.replace

    def rename(src: str | Path, dst: str | Path) -> None:
        renames.append((Path(src).parent.name, Path(dst).parent.name))
        if across_file_systems and Path(src).parent != Path(dst).parent:
            raise OSError(errno.EXDEV, "Invalid cross-device link")
        replace(src, dst)

    monkeypatch.setattr(atomic_files.os, "replace", rename)
    move_into_place(source, target)
    assert target.read_bytes() == b"rows" and not source.exists()
    assert sorted(path.name for path in target.parent.iterdir()) == ["index.parquet"]  # no temporary left
    assert renames == ([("a", "b"), ("b", "b")] if across_file_systems else [("a", "b")])


def test_other_errors_are_raised(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        move_into_place(tmp_path / "missing", tmp_path / "target")


def test_a_copy_that_fails_leaves_no_temporary_and_the_source_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, target = tmp_path / "a" / "index.parquet", tmp_path / "b" / "index.parquet"
    source.parent.mkdir()
    target.parent.mkdir()
    source.write_bytes(b"rows")

    def across(src: str | Path, dst: str | Path) -> None:
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    def disk_full(src: str | Path, dst: str | Path) -> None:
        Path(dst).write_bytes(b"ro")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomic_files.os, "replace", across)
    monkeypatch.setattr(atomic_files.shutil, "copyfile", disk_full)
    with pytest.raises(OSError, match="No space left"):
        move_into_place(source, target)
    assert list(target.parent.iterdir()) == [] and source.read_bytes() == b"rows"
