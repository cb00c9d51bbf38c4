"""Where the finished ``group_level_metrics`` entries go: a list, or a binary spool holding them as JSON.

A run has one entry per task, each with one ``rollout_info`` per row, so the streaming accumulator writes
the entries to a spool as their tasks complete, a small batch at a time (``orjson`` bytes, one entry a
line: orjson never writes a raw newline byte), and copies the spool into the answer at the end, newlines
turned into commas. The rare late change (NeMo Gym's ``per_task_metrics``, a table that stops being
all-int) is a pass over the spool.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from typing import IO, Any, Protocol

import orjson

Entry = dict[str, Any]
Change = Callable[[int, Entry], Entry]

_CHUNK = 1 << 20


class GroupStore(Protocol):
    def extend(self, entries: list[Entry]) -> None: ...

    def rewrite(self, change: Change) -> None:
        """Replace each entry by ``change(position, entry)``."""

    def entries(self) -> list[Entry]: ...

    def write_json(self, fp: IO[bytes]) -> None:
        """Write the entries to `fp` as one JSON array."""

    def close(self) -> None:
        """Release what holds the entries (never a spool the caller gave)."""


class InMemoryGroups:
    """The entries as a list: for an answer that is wanted as a dict anyway."""

    def __init__(self) -> None:
        self._entries: list[Entry] = []

    def extend(self, entries: list[Entry]) -> None:
        self._entries.extend(entries)

    def rewrite(self, change: Change) -> None:
        self._entries = [change(position, entry) for position, entry in enumerate(self._entries)]

    def entries(self) -> list[Entry]:
        return self._entries

    def write_json(self, fp: IO[bytes]) -> None:
        fp.write(orjson.dumps(self._entries))

    def close(self) -> None:
        self._entries = []


class SpooledGroups:
    """The entries as JSON lines in `spool` (from its current position; readable, writable and seekable),
    or in a temporary file. A rewrite moves them to a new temporary file."""

    def __init__(self, spool: IO[bytes] | None = None) -> None:
        self._owned = spool is None
        self._spool = spool if spool is not None else tempfile.TemporaryFile()
        self._start = self._spool.tell()
        self._count = 0

    def extend(self, entries: list[Entry]) -> None:
        if not entries:
            return
        if self._count:
            self._spool.write(b"\n")
        self._spool.write(b"\n".join(map(orjson.dumps, entries)))
        self._count += len(entries)

    def rewrite(self, change: Change) -> None:
        changed = SpooledGroups()
        for position, entry in enumerate(self._iter_entries()):
            changed.extend([change(position, entry)])
        self.close()
        self._spool, self._start, self._owned = changed._spool, changed._start, True

    def entries(self) -> list[Entry]:
        return list(self._iter_entries())

    def write_json(self, fp: IO[bytes]) -> None:
        fp.write(b"[")
        for chunk in self._chunks():
            fp.write(chunk.replace(b"\n", b","))
        fp.write(b"]")

    def close(self) -> None:
        if self._owned:
            self._spool.close()

    def _iter_entries(self) -> Iterator[Entry]:
        self._spool.seek(self._start)
        if self._count:
            for line in self._spool:
                yield orjson.loads(line)
        self._spool.seek(0, 2)

    def _chunks(self) -> Iterator[bytes]:
        self._spool.seek(self._start)
        while chunk := self._spool.read(_CHUNK):
            yield chunk
        self._spool.seek(0, 2)
