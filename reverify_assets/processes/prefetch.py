"""Work started early in threads, for code later in the same run to take instead of doing it again.

``reverify run`` knows its input files as soon as it has read its options; the assets that index and
fingerprint them run after Dagster's import and instance set-up, which take most of the start-up. Work
started here runs alongside that (polars and xxhash release the GIL). A result is handed out once, and
only while the files it was made from are unchanged (same inode, size and modification time).
"""

from __future__ import annotations

import importlib
import os
import sys
import threading
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import xxhash

from reverify_assets.errors import ReadError

T = TypeVar("T")
Identity = tuple[int, int, int]
# A digest started ahead reads in big chunks: each costs the thread one GIL hand-back, which it waits for while
# the main thread imports. One computed on the spot reads in small ones: the buffer is held (and zeroed) while
# it runs, at a million rows beside the plan, and XXH3 reads 1 MB chunks as fast.
AHEAD_CHUNK_BYTES = 16 << 20
ON_THE_SPOT_CHUNK_BYTES = 1 << 20
# Of a thread whose result is needed last, so that it yields the CPU to the others (Linux: per thread).
LOW_PRIORITY_NICENESS = 10


@dataclass(frozen=True)
class _Started:
    files: tuple[Path, ...]
    identities: tuple[Identity, ...]  # of ``files`` when the work started
    result: Future[Any]


class PrefetchedWork:
    """Work started (or results made) ahead, each under a key, for the code that needs it to take once.

    One object per command (or per run): the command hands it to its Dagster run as a resource, so a run made
    elsewhere (the UI's) has one of its own, empty, and does the work on the spot.
    """

    def __init__(self) -> None:
        self._started: dict[Hashable, _Started] = {}

    def start(
        self, key: Hashable, files: Sequence[Path], work: Callable[[], T], *, low_priority: bool = False
    ) -> Future[T]:
        """Run ``work`` in a thread of its own; ``take(key)`` hands its result over."""
        future: Future[T] = Future()
        self._started[key] = _Started(tuple(files), tuple(_identity(path) for path in files), future)
        # A daemon: a run that failed exits at once, without waiting for work nobody will take.
        thread = threading.Thread(
            target=_fulfil, args=(future, work, low_priority), name=f"prefetch {key}", daemon=True
        )
        thread.start()
        return future

    def hand_over(self, key: Hashable, files: Sequence[Path], result: Any) -> None:
        """Leave a result already made, for ``take(key)`` in a later step of the same run."""
        future: Future[Any] = Future()
        future.set_result(result)
        self._started[key] = _Started(tuple(files), tuple(_identity(path) for path in files), future)

    def take(self, key: Hashable) -> Future[Any] | None:
        """The work started under ``key`` (once), unless one of its files changed since it started."""
        started = self._started.pop(key, None)
        if started is None:
            return None
        try:
            unchanged = tuple(_identity(path) for path in started.files) == started.identities
        except OSError:
            unchanged = False
        return started.result if unchanged else None

    def forget(self, key: Hashable) -> None:
        self._started.pop(key, None)

    def file_digest(self, path: Path) -> bytes:
        """XXH3-128 of a file's bytes: started ahead by ``start_file_digest``, else computed now."""
        started = self.take(_digest_key(path))
        return started.result() if started is not None else _xxh3_128(path, ON_THE_SPOT_CHUNK_BYTES)

    def start_file_digest(self, path: Path) -> Hashable:
        key = _digest_key(path)
        # Taken only once the Dagster run is under way, after the scans: the start-up waits for those.
        self.start(key, [path], lambda: _xxh3_128(path, AHEAD_CHUNK_BYTES), low_priority=True)
        return key


def start_import(module: str) -> Future[None]:
    """Import ``module`` in a thread of its own, so that the thread that waits for it can watch other work."""

    def load() -> None:
        importlib.import_module(module)

    future: Future[None] = Future()
    threading.Thread(target=_fulfil, args=(future, load, False), name=f"import {module}", daemon=True).start()
    return future


def _digest_key(path: Path) -> Hashable:
    return ("digest", path.resolve())


def _xxh3_128(path: Path, chunk_bytes: int) -> bytes:
    """A digest tells a file's versions apart, no adversary in sight: XXH3 reads 2.8 GB in 0.3 s of CPU where
    SHA-256 (with the CPU's SHA instructions) took 1.6 s, on the start-up's other core and, for the output, after
    the verify step."""
    digest = xxhash.xxh3_128()
    chunk = bytearray(chunk_bytes)
    view = memoryview(chunk)
    try:
        with open(path, "rb", buffering=0) as fh:
            while size := fh.readinto(chunk):
                digest.update(view[:size])
    except OSError as exc:
        raise ReadError(path, exc) from exc
    return digest.digest()


def _identity(path: Path) -> Identity:
    stat = path.stat()
    return stat.st_ino, stat.st_size, stat.st_mtime_ns


def _fulfil(future: Future[T], work: Callable[[], T], low_priority: bool) -> None:
    if low_priority and sys.platform == "linux":
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), LOW_PRIORITY_NICENESS)
    try:
        future.set_result(work())
    except BaseException as exc:  # handed to whoever takes the result, in the thread that asks
        future.set_exception(exc)
