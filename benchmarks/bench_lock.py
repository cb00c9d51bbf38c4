"""One heavy measurement at a time on this machine: an exclusive ``flock`` on a well-known file.

Benchmarks started by different people (or sessions) on the same 2-core machine would otherwise share its
cores and each report half the speed. Every heavy phase holds the lock; whoever comes second waits and
says so, so a figure never silently includes someone else's load. The lock is released when the file
descriptor closes, so a benchmark killed mid-way never leaves it held.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["LOCK_PATH", "exclusive"]

LOCK_PATH = Path("/tmp/reverify-bench.lock")


@contextmanager
def exclusive(what: str, path: Path = LOCK_PATH) -> Iterator[float]:
    """Hold the benchmark lock for the ``with`` block; yields the seconds spent waiting for it."""
    # 0o666 (before the umask): another user's benchmark must be able to open the same file.
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    waited = 0.0
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"  waiting for {path} (another benchmark is measuring) before: {what}", flush=True)
            started = time.perf_counter()
            fcntl.flock(fd, fcntl.LOCK_EX)
            waited = time.perf_counter() - started
            print(f"  waited {waited:.1f} s for {path}; now: {what}", flush=True)
        yield waited
    finally:
        os.close(fd)
