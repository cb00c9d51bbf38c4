"""A result file whose writer died mid-line: its last line is made whole or dropped before we append."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import orjson

TAIL_PROBE_BYTES = 1 << 16


@dataclass(frozen=True)
class TailRepair:
    """What ``repair_unterminated_tail`` did, and how to put the file back as it was."""

    path: Path
    message: str
    dropped: bytes  # the bytes cut off the end; empty when a newline was added instead

    def undo(self) -> None:
        """For a run that stops with an error before appending: an error exit leaves the file as it found it."""
        with open(self.path, "rb+") as fh:
            size = fh.seek(0, os.SEEK_END)
            if self.dropped:
                fh.write(self.dropped)
            else:
                fh.truncate(size - 1)


def repair_unterminated_tail(path: Path) -> TailRepair | None:
    """Ensure the file ends with a newline; what was done, or None if nothing.

    Our own writer only ever appends whole lines, but another tool (or a full disk) may leave half
    a row: appending after it would glue two rows into one corrupt line.
    """
    if not path.exists() or path.stat().st_size == 0:
        return None
    with open(path, "rb+") as fh:
        size = fh.seek(0, os.SEEK_END)
        fh.seek(max(0, size - 1))
        if fh.read(1) == b"\n":
            return None
        start = _last_line_start(fh, size)
        fh.seek(start)
        tail = fh.read()
        try:
            orjson.loads(tail)
        except orjson.JSONDecodeError:
            fh.truncate(start)
            message = f"dropped an incomplete last line of {path} ({len(tail)} bytes, left by an interrupted write)"
            return TailRepair(path, message, tail)
        fh.seek(size)
        fh.write(b"\n")
        return TailRepair(path, f"added the missing newline at the end of {path}", b"")


def _last_line_start(fh: object, size: int) -> int:
    position = size
    while position > 0:
        step = min(TAIL_PROBE_BYTES, position)
        position -= step
        fh.seek(position)  # type: ignore[attr-defined]
        chunk = fh.read(step)  # type: ignore[attr-defined]
        newline = chunk.rfind(b"\n")
        if newline >= 0:
            return position + newline + 1
    return 0
