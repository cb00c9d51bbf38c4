"""Whole files written under a temporary name in the same folder and moved into place in one step."""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from reverify_assets.errors import WriteError

if TYPE_CHECKING:  # the frame writes itself: readers of JSONL that import this module load no polars
    import polars as pl


def temporary_name(path: Path) -> Path:
    """Hidden, in the same folder (so the rename is atomic), and per process (so writers never share one)."""
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def write_bytes_atomic(path: Path, content: bytes) -> None:
    tmp = temporary_name(path)
    try:
        tmp.write_bytes(content)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise WriteError(path, exc) from exc
    os.replace(tmp, path)


def write_parquet_atomic(frame: pl.DataFrame, path: Path) -> None:
    tmp = temporary_name(path)
    frame.write_parquet(tmp)
    os.replace(tmp, path)


def move_into_place(source: Path, path: Path) -> None:
    """``source`` renamed to ``path``; across file systems, copied under a temporary name next to ``path`` first."""
    try:
        os.replace(source, path)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        tmp = temporary_name(path)
        try:
            shutil.copyfile(source, tmp)
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        source.unlink()
