"""A result file whose writer died mid-line: its last line is made whole or dropped before we append."""

from __future__ import annotations

import os
from pathlib import Path

import orjson

TAIL_PROBE_BYTES = 1 << 16


def repair_unterminated_tail(path: Path) -> str | None:
    """Ensure the file ends with a newline; returns what was done (for the user), or None if nothing.

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
            return f"dropped an incomplete last line of {path} ({len(tail)} bytes, left by an interrupted write)"
        fh.seek(size)
        fh.write(b"\n")
        return f"added the missing newline at the end of {path}"


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
