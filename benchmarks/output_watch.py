"""When a run's verify phase begins and ends, read from outside: the growth of its output files.

Why the output files and not the CLI's stderr or the server: `reverify run` appends every verified row to
the output (or its failures sidecar) as soon as it settles, in whole-line ``os.write`` calls on an
O_APPEND descriptor, and writes whenever nothing else has settled yet (``run/verify_loop.py``). So

* the first growth of either file is the first ``/verify`` answer, i.e. the first request's arrival at
  the server plus one grading and one loopback round trip (milliseconds at any concurrency);
* the last growth of the file *as first created* is the last answer. After it the CLI sorts the output
  into a new file moved over the old name (a new inode), which is not growth and is recorded apart.

This needs no change to the product, no log format and no access to the server, and it works whatever the
server is (built-in, several workers, remote). Its resolution is the polling interval (10 ms), far below
the phases it separates. A stat() every 10 ms costs the measured processes nothing noticeable.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

__all__ = ["FileGrowth", "OutputWatcher"]


@dataclass
class FileGrowth:
    path: Path
    created_at: float | None = None  # first seen to exist
    first_growth_at: float | None = None  # first seen non-empty, on the inode first seen
    last_growth_at: float | None = None  # last size increase seen on that inode
    replaced_at: float | None = None  # first seen under another inode (the sorted copy moved into place)
    inode: int | None = None
    size: int = 0

    def observe(self, now: float) -> None:
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            return
        if self.inode is None:
            self.inode, self.created_at = stat.st_ino, now
        if stat.st_ino != self.inode:
            if self.replaced_at is None:
                self.replaced_at = now
            return
        if stat.st_size > self.size:
            self.size = stat.st_size
            self.last_growth_at = now
            if self.first_growth_at is None:
                self.first_growth_at = now


class OutputWatcher:
    """Polls ``paths`` every ``interval_s`` in a thread from ``start()`` to ``stop()``."""

    def __init__(self, paths: list[Path], interval_s: float = 0.01) -> None:
        self.files = [FileGrowth(path) for path in paths]
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="output-watcher", daemon=True)

    def __enter__(self) -> OutputWatcher:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self._observe()  # one last look, so a row written just before the end is not missed

    def _observe(self) -> None:
        now = time.perf_counter()
        for growth in self.files:
            growth.observe(now)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._observe()
            self._stop.wait(self.interval_s)

    @property
    def created_at(self) -> float | None:
        return min((f.created_at for f in self.files if f.created_at is not None), default=None)

    @property
    def first_row_at(self) -> float | None:
        return min((f.first_growth_at for f in self.files if f.first_growth_at is not None), default=None)

    @property
    def last_row_at(self) -> float | None:
        return max((f.last_growth_at for f in self.files if f.last_growth_at is not None), default=None)

    @property
    def replaced_at(self) -> float | None:
        return max((f.replaced_at for f in self.files if f.replaced_at is not None), default=None)
