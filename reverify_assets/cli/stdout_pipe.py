"""Standard output that outlives its reader: ``reverify aggregate ... | head`` must still write its files."""

from __future__ import annotations

import os
from typing import Any, TextIO


class ReaderMayLeave:
    """Wraps standard output: once its reader has gone (a closed pipe), what is left to print is dropped.

    Without it the first print after ``head`` exits raises BrokenPipeError, and the command stops before
    writing what it prints about (``aggregate`` prints the merged file's name before it writes the metrics).
    """

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._discard_the_rest()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._discard_the_rest()

    def _discard_the_rest(self) -> None:
        # Onto the same descriptor, so that the stream's pending bytes (flushed again at exit) go nowhere too.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, self._stream.fileno())
        os.close(devnull)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)
