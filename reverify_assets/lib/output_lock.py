"""One writer per output: two runs appending to one file would write every pending key twice."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from reverify_assets.errors import ReverifyError


@contextmanager
def exclusive_output(output: Path) -> Iterator[None]:
    """Hold ``.<name>.lock`` beside the output for the whole run; a second run is refused at once."""
    output.parent.mkdir(parents=True, exist_ok=True)
    lock_path = output.with_name(f".{output.name}.lock")
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ReverifyError(f"another run is writing {output} (it holds {lock_path}); wait for it") from None
        yield
    finally:
        os.close(fd)  # closing releases the lock; the empty lock file stays, harmlessly
