"""A reader of an open file that keeps its own place: each upload of one spooled body starts at its first byte.

Handles made by ``os.dup`` share one offset: a retried upload would start where a failed one stopped, and a read
left running by an abandoned attempt (aiohttp reads a file payload in a worker thread) would move the next
attempt's place. ``os.pread`` reads at a position without touching the descriptor's offset.
"""

from __future__ import annotations

import io
import os


class PositionalReader(io.RawIOBase):
    """Reads the file open on ``fd`` from its start; closing the reader leaves ``fd`` open."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self._fd = fd
        self._position = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def fileno(self) -> int:  # an uploader sizes the body by fstat
        return self._fd

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        data = os.pread(self._fd, len(buffer), self._position)
        buffer[: len(data)] = data
        self._position += len(data)
        return len(data)

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        if whence == os.SEEK_SET:
            position = offset
        elif whence == os.SEEK_CUR:
            position = self._position + offset
        elif whence == os.SEEK_END:
            position = os.fstat(self._fd).st_size + offset
        else:
            raise ValueError(f"invalid whence: {whence}")
        if position < 0:
            raise ValueError(f"negative seek position {position}")
        self._position = position
        return position

    def tell(self) -> int:
        return self._position
