"""Streaming JSONL: reading with file:line errors, and the two safe ways we write.

Rows are never all held in memory: readers yield one line at a time, with the byte offset so a
later step can read the same row again with one seek.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO

import orjson

from reverify_assets.errors import WRITE_ERRNOS, InputError, ReadError, WriteError
from reverify_assets.files.atomic import temporary_name

# Rows run to kilobytes: with the default 8 KiB buffer, iterating a 245 MB output took 0.09-0.10 s, with
# 64 KiB 0.04-0.05 s.
READ_BUFFER_BYTES = 1 << 16
# A rollout line runs to a few kilobytes: one read of this size takes most lines whole.
PREAD_FIRST_BYTES = 1 << 12
# Written a row at a time, a file opened with Python's default buffer (the file system's 4 KiB block) took a
# write call for every row of kilobytes: a million calls to merge a million rows.
WRITE_BUFFER_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class JsonlLine:
    line_no: int  # 1-based, as editors show it
    offset: int
    row: dict[str, Any]


def iter_jsonl(path: Path) -> Iterator[JsonlLine]:
    """Yield every row of a JSONL file; a blank line, bad JSON or a non-object is an error naming the line."""
    try:
        fh = open(path, "rb", buffering=READ_BUFFER_BYTES)
    except OSError as exc:
        raise ReadError(path, exc) from exc
    with fh:
        offset = 0
        lines = enumerate(fh, start=1)
        while True:
            try:
                line_no, line = next(lines)
            except StopIteration:
                return
            except OSError as exc:
                raise ReadError(path, exc) from exc
            yield JsonlLine(line_no, offset, parse_row(line, path, line_no))
            offset += len(line)


def parse_row(raw: bytes, path: Path | str, line_no: int) -> dict[str, Any]:
    """The row of one line, its line break included or not (JSON whitespace either way: parsed as it is, a line
    of kilobytes is not copied first)."""
    try:
        row = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise _unparsable(raw, path, line_no) from exc
    if not isinstance(row, dict):
        raise InputError(
            f"{path}:{line_no}: expected a JSON object, found {type(row).__name__}", path=path, line=line_no
        )
    return row


def _unparsable(raw: bytes, path: Path | str, line_no: int) -> InputError:
    line = raw.rstrip(b"\r\n")
    if not line.strip():
        return InputError(
            f"{path}:{line_no}: blank line (every line of a JSONL file must hold one JSON object)",
            path=path,
            line=line_no,
        )
    try:
        orjson.loads(line)  # again without the line break, for a position in the line: a cut line ends there
    except orjson.JSONDecodeError as exc:
        return InputError(f"{path}:{line_no}: malformed JSON: {exc}", path=path, line=line_no)
    # not reached: a line break is JSON whitespace
    return InputError(f"{path}:{line_no}: malformed JSON", path=path, line=line_no)


def read_line_at(fh: BinaryIO, offset: int) -> bytes:
    """The stored line at ``offset``, byte for byte, newline-terminated (a file's last line may lack one)."""
    fh.seek(offset)
    line = fh.readline()
    return line if line.endswith(b"\n") else line + b"\n"


def pread_line(fd: int, offset: int) -> bytes:
    """The line at ``offset`` without its line break, by ``pread``: no seek, and no buffer refilled for one line
    of a file read in random order (a seek drops a buffered reader's buffer)."""
    chunk = more = os.pread(fd, PREAD_FIRST_BYTES, offset)
    end = chunk.find(b"\n")
    while end < 0 and more:  # a long line: read on, in growing steps, until a break or the end of the file
        more = os.pread(fd, len(chunk), offset + len(chunk))
        found = more.find(b"\n")
        end = -1 if found < 0 else len(chunk) + found
        chunk += more
    return (chunk if end < 0 else chunk[:end]).rstrip(b"\r\n")


def read_row_at(fh: BinaryIO, offset: int, path: Path | str, line_no: int) -> dict[str, Any]:
    try:
        fh.seek(offset)
        line = fh.readline()
    except OSError as exc:
        raise ReadError(path, exc) from exc
    return parse_row(line, path, line_no)


class LineAppender:
    """Appends complete lines to a file that a crash must never leave with half a row.

    Each batch of lines goes out in unbuffered ``os.write`` calls on an O_APPEND descriptor and nothing
    else writes the file, so a killed process leaves at most one half-written last line (a kernel may cut
    a large write short when SIGKILL lands mid-way; a full disk can too); ``--resume`` and ``--append``
    repair that line before they append (see ``output_tail``).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as exc:
            raise WriteError(path, exc) from exc
        self.lines_written = 0

    def write_lines(self, lines: Iterable[bytes]) -> None:
        """All the lines, or none: a write the disk refuses part of way is cut back to where the batch began."""
        batch = b"".join(lines)
        if not batch:
            return
        view = memoryview(batch)
        start = os.fstat(self._fd).st_size
        try:
            while view:
                written = os.write(self._fd, view)
                view = view[written:]
        except OSError as exc:
            os.ftruncate(self._fd, start)  # frees blocks: it needs no room
            raise WriteError(self.path, exc) from exc
        self.lines_written += batch.count(b"\n")

    def close(self) -> None:
        os.close(self._fd)

    def __enter__(self) -> LineAppender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AtomicWriter:
    """Writes a whole file under a temporary name and moves it into place only on success."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._tmp = temporary_name(path)
        self._fh: BinaryIO | None = None

    def __enter__(self) -> BinaryIO:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = open(self._tmp, "wb", buffering=WRITE_BUFFER_BYTES)
        except OSError as exc:
            raise WriteError(self.path, exc) from exc
        return self._fh

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self._fh is not None
        try:
            self._fh.close()  # with a big buffer, a full disk is often found only here
        except OSError as close_error:
            self._tmp.unlink(missing_ok=True)
            raise WriteError(self.path, close_error) from close_error
        except BaseException:
            self._tmp.unlink(missing_ok=True)
            raise
        if exc_type is None:
            os.replace(self._tmp, self.path)
            return
        self._tmp.unlink(missing_ok=True)
        # The block's writes to the file: a read error of the block's own (it may copy another file) stays as is.
        if isinstance(exc, OSError) and exc.errno in WRITE_ERRNOS:
            raise WriteError(self.path, exc) from exc


def write_json_atomic(path: Path, value: Any) -> None:
    with AtomicWriter(path) as fh:
        fh.write(orjson.dumps(value, option=orjson.OPT_INDENT_2) + b"\n")
