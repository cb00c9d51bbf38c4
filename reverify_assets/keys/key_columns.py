"""The key columns of a JSONL file read by simdjson: every row's key, byte offset and line number.

The fast way to index a file of NeMo Gym rows. simdjson finds the few fields asked for without building the
row in Python, and the prompt's fingerprint (``rollout_identity``) is taken from the same parse. CPU time for
the files of 100k rows: the rollouts (283 MB) 0.35 s, where polars' NDJSON reader
took 0.80 s and orjson, line by line, 0.81 s; the inputs with their routes (141 MB) 0.37 s, 0.52 s and 0.64 s.

It answers only for a file that the exact scan (``key_index.scan_keys``: orjson, line by line) would index
without a word; for any other (a blank line, bad JSON, a byte order mark, a key that is not an integer, a
missing response, an unreadable file) it answers None, and the caller runs the exact scan, which names the
file, the line and the fault. One difference on input both accept: a field named twice in one object, where
simdjson finds the first and orjson keeps the last. The verify step and the shard merge parse every row again
and check its key (``rollout_keys.check_indexed_key``).

Nothing here imports polars: the start-up's scan process (``keys.scan_process``) runs this beside Dagster's
import, and starts the sooner for it.
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

import simdjson

from reverify_assets.keys.rollout_identity import PromptShape
from reverify_assets.keys.rollout_keys import ROLLOUT_FIELD, TASK_FIELD
from reverify_assets.keys.route_fields import ROUTE_FIELDS, RouteTable

# Whole lines per read: hundreds of rows, in a small buffer.
BLOCK_BYTES = 1 << 20
RESPONSE_FIELD = "response"
UTF8_BOM = b"\xef\xbb\xbf"
_CONTAINERS = (simdjson.Object, simdjson.Array)
SHAPES_KEPT = 1024
_ABSENT: Any = object()


class FieldsSeen(Protocol):
    """What a scan shows every row's top-level fields ``names`` to (those the row has, as Python values)."""

    names: tuple[str, ...]

    def see(self, fields: dict[str, Any]) -> None: ...


class ExactScanNeeded(Exception):
    """A line only the exact scan can judge (see the module doc)."""


@dataclass(frozen=True)
class KeyColumns:
    """One value per row, in file order; ``prompts``: each row's ``prompt_fingerprint``, if asked for;
    ``route_of_row`` numbers each row's route in ``routes``."""

    tasks: array[int]
    rollouts: array[int]
    offsets: array[int]
    prompts: array[int] | None = None
    route_of_row: array[int] | None = None
    routes: list[dict[str, Any]] | None = None

    @property
    def rows(self) -> int:
        """Also the last line's number: every line is a row (a blank one sends the file to the exact scan)."""
        return len(self.tasks)

    @staticmethod
    def joined(parts: list[KeyColumns]) -> KeyColumns:
        """The columns of consecutive parts of one file (``FilePart``), as one scan of them would give: the first
        part's, extended in place. Parts of more than one have no routes (each would number its own)."""
        if len(parts) > 1 and any(part.route_of_row is not None for part in parts):
            raise ValueError("parts with routes cannot be joined: each numbers its own")
        whole, *rest = parts
        for part in rest:
            for values, more in zip(whole.arrays, part.arrays, strict=True):
                values.extend(more)
        return whole

    @property
    def arrays(self) -> tuple[array[int], ...]:
        """The columns: tasks, rollouts, offsets, then the prompts and the route numbers if there are any."""
        return tuple(
            values
            for values in (self.tasks, self.rollouts, self.offsets, self.prompts, self.route_of_row)
            if values is not None
        )


@dataclass(frozen=True)
class FilePart:
    """The lines from byte ``start`` (a line's first) to ``end`` (the first of a line after them; None: the end
    of the file)."""

    start: int
    end: int | None

    @classmethod
    def halves(cls, path: Path) -> tuple[FilePart, FilePart]:
        """The file cut at the first line that starts after its middle (the second half empty if none does)."""
        with open(path, "rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            fh.seek(size // 2)
            fh.readline()  # the rest of the line the middle falls in
            cut = fh.tell()
        return cls(0, cut), cls(cut, None)


WHOLE_FILE = FilePart(0, None)


def scan_key_columns(
    path: Path,
    *,
    with_routes: bool = False,
    with_prompts: bool = False,
    require_response: bool = False,
    limit: int | None = None,
    fields: FieldsSeen | None = None,
) -> KeyColumns | None:
    """The first ``limit`` rows' key columns (every row's without), with each row's route if ``with_routes`` and
    its prompt's fingerprint if ``with_prompts``; None when the exact scan must have its say (see the module
    doc). ``require_response``: a row without a ``response`` field is such a case. ``fields``: shown each row's
    fields it names, as they are scanned (rows already shown when the answer turns out None are shown again by
    the exact scan)."""
    whole = KeyColumns(
        array("q"), array("q"), array("q"), array("q") if with_prompts else None, array("i") if with_routes else None
    )
    routes = RouteTable() if with_routes else None
    try:
        blocks = key_column_blocks(
            path,
            routes=routes,
            prompts=with_prompts,
            require_response=require_response,
            limit=limit,
            fields=fields,
        )
        for block in blocks:
            for values, more in zip(whole.arrays, block.arrays, strict=True):
                values.extend(more)
    except ExactScanNeeded:
        return None
    return replace(whole, routes=None if routes is None else routes.routes)


def key_column_blocks(
    path: Path,
    *,
    routes: RouteTable | None = None,
    prompts: bool = False,
    require_response: bool = False,
    limit: int | None = None,
    fields: FieldsSeen | None = None,
    part: FilePart = WHOLE_FILE,
) -> Iterator[KeyColumns]:
    """``scan_key_columns`` a block of lines at a time, so that a caller need not hold every row's columns:
    each block's columns, its rows' route numbers in ``routes`` (which numbers the whole file's routes) if
    given, their prompts' fingerprints if ``prompts``. Raises ExactScanNeeded instead of answering None.
    ``part``: the lines of that part of the file only (their offsets the file's).

    The inputs' rows (scanned with ``routes``, without ``fields``) that repeat the row before them but for the
    rollout index are not parsed (``_RepeatedRows``)."""
    parser = simdjson.Parser()
    route_ids = None if routes is None else _RouteIds(routes)
    # The inputs (scanned with their routes) are in key order, a task's rows repeated; the rollouts are not.
    repeats = _RepeatedRows() if routes is not None and fields is None else None
    prompt_of = PromptShape().fingerprint if prompts else None
    rows_left = -1 if limit is None else limit
    offset = part.start
    try:
        for lines in _lines_by_block(path, part):
            tasks, rollouts, offsets = array("q"), array("q"), array("q")
            fingerprints: array[int] | None = array("q") if prompts else None
            route_of_row: array[int] | None = None if route_ids is None else array("i")
            for raw in lines:
                if rows_left == 0:
                    break
                rows_left -= 1
                if repeats is not None and (rollout := repeats.rollout_of(raw)) is not None:
                    task = repeats.task
                    if route_of_row is not None:
                        route_of_row.append(repeats.route)
                    if fingerprints is not None:
                        fingerprints.append(repeats.prompt)
                else:
                    if raw.startswith(UTF8_BOM):  # simdjson skips it; orjson, and so the verify step, refuses it
                        raise ExactScanNeeded
                    row = parser.parse(raw)  # raises for a blank line and for bad JSON or UTF-8
                    if type(row) is not simdjson.Object:
                        raise ExactScanNeeded
                    task, rollout = row.get(TASK_FIELD), row.get(ROLLOUT_FIELD)
                    # `type(...) is int`: true and false are not indexes, nor is 1.0.
                    if type(task) is not int or type(rollout) is not int or task < 0 or rollout < 0:
                        raise ExactScanNeeded
                    if require_response and row.get(RESPONSE_FIELD) is None:  # null is no response either
                        raise ExactScanNeeded
                    route = prompt = 0
                    if route_ids is not None and route_of_row is not None:
                        route_of_row.append(route := route_ids.of(row))
                    if fields is not None:
                        fields.see(_picked(row, fields.names))
                    if fingerprints is not None and prompt_of is not None:
                        fingerprints.append(prompt := prompt_of(row))
                    del row  # the parser refuses to parse again while a row of the last parse is alive
                    if repeats is not None:
                        repeats.remember(raw, task, rollout, route, prompt)
                tasks.append(task)
                rollouts.append(rollout)
                offsets.append(offset)
                offset += len(raw) + 1
            if tasks:
                yield KeyColumns(tasks, rollouts, offsets, fingerprints, route_of_row)
            if rows_left == 0:
                break
    except (OSError, ValueError, RuntimeError, OverflowError) as exc:  # simdjson's; a key beyond 64 bits
        raise ExactScanNeeded from exc


def _lines_by_block(path: Path, part: FilePart) -> Iterator[list[bytes]]:
    """The part's lines without their line breaks (a ``\\r`` before one is JSON whitespace), a block at a time:
    the file is read in pieces of ``BLOCK_BYTES``, never whole."""
    with open(path, "rb") as fh:
        fh.seek(part.start)
        left = -1 if part.end is None else part.end - part.start
        carry: list[bytes] = []  # the start of a line that runs on into the next piece (joined once, when whole)
        while left and (piece := fh.read(BLOCK_BYTES if left < 0 else min(BLOCK_BYTES, left))):
            left -= len(piece) if left > 0 else 0
            lines = piece.split(b"\n")
            if len(lines) == 1:  # no line break in this piece
                carry.append(piece)
                continue
            if carry:
                lines[0] = b"".join([*carry, lines[0]])
            last = lines.pop()
            carry = [last] if last else []
            yield lines
        if carry:
            yield [b"".join(carry)]  # a last line without a line break


class _RepeatedRows:
    """The materialized inputs' rows that repeat the row before them but for the rollout index, told without
    parsing them.

    NeMo Gym writes the materialized inputs in key order, a task's row repeated once a rollout up to its last
    field, ``_ng_rollout_index``. A row that starts with the bytes of the last row parsed up to that field's
    name, and ends in a JSON integer and the object's closing brace, is that row with another rollout index:
    same task, same route, same prompt, and valid JSON. At 4 rollouts a task this spares the parse of three rows
    in four: the scan of a million inputs took 2.5-2.8 s of CPU instead of 3.6-3.8 s. A row that does not qualify is
    parsed, as any."""

    def __init__(self) -> None:
        self._head = b""  # the bytes of the last row parsed, through the name of its rollout index; b"": none
        self.task = self.route = self.prompt = 0  # that row's

    def rollout_of(self, raw: bytes) -> int | None:
        """The rollout index of ``raw`` if it repeats the last row remembered, else None."""
        head = self._head
        if not head or not raw.startswith(head):
            return None
        return _index_closing(raw[len(head) :])

    def remember(self, raw: bytes, task: int, rollout: int, route: int, prompt: int) -> None:
        """A row just parsed: the rows that repeat it are known by it, if its rollout index is its last field,
        found by name from the end: a name that follows a comma (or opens the row), not the end of an escaped
        key's text, and the value the parse read (a row that names the field twice is not remembered)."""
        cut = raw.rfind(_ROLLOUT_INDEX)  # from the end: the key is the row's last field
        head = raw[: cut + len(_ROLLOUT_INDEX)] if cut > 0 else b""
        opens_a_field = raw[:cut].rstrip(_JSON_SPACE).endswith((b",", b"{"))
        if head and opens_a_field and _index_closing(raw[len(head) :]) == rollout:
            self._head, self.task, self.route, self.prompt = head, task, route, prompt
        else:
            self._head = b""


def _index_closing(tail: bytes) -> int | None:
    """The integer of ``tail`` if it is a JSON integer in 0..2**63-1 then the closing brace, whitespace around."""
    body = tail.rstrip(_JSON_SPACE)
    if not body.endswith(b"}"):
        return None
    number = body[:-1].strip(_JSON_SPACE)
    if not number.isdigit() or len(number) > _MAX_DIGITS or (number[0] == _ZERO and len(number) > 1):
        return None
    return int(number)


_ROLLOUT_INDEX = b'"_ng_rollout_index":'
_JSON_SPACE = b" \t\r\n"
_MAX_DIGITS = 18  # always below 2**63, the largest index the columns hold
_ZERO = ord("0")


class _RouteIds:
    """Each row's route number, as ``RouteTable`` numbers the route fields of the rows parsed exactly."""

    def __init__(self, table: RouteTable) -> None:
        self.table = table
        # Route fields by their minified JSON (a scalar by its type and repr: -0.0 is not 0.0 to the exact scan's
        # numbering either): most rows are told at a glance.
        self._known: dict[tuple[Any, ...], int] = {}
        # The route fields a row has, by the row's names: a file's rows come in a few shapes. Up to a bound, so
        # that rows of ever new names cannot grow it without end.
        self._present: dict[tuple[str, ...], tuple[str, ...]] = {}

    def of(self, row: simdjson.Object) -> int:
        # The row's names, read once: simdjson looks for a name that is not there by raising inside, slowly.
        names = tuple(row.keys())
        present = self._present.get(names)
        if present is None:
            present = tuple(name for name in ROUTE_FIELDS if name in names)
            if len(self._present) < SHAPES_KEPT:
                self._present[names] = present
        signature: list[Any] = [present]
        for name in present:
            value = row.get(name)
            signature.append(value.mini if type(value) in _CONTAINERS else (type(value), repr(value)))
        route_id = self._known.get(key := tuple(signature))
        if route_id is None:
            fields = {name: _as_python(row.get(name)) for name in present}
            route_id = self._known[key] = self.table.id_of(fields)
        return route_id


def _picked(row: simdjson.Object, names: tuple[str, ...]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for name in names:
        # A name the row lacks costs simdjson an exception inside, but the rows of a file mostly have them.
        value = row.get(name, _ABSENT)
        if value is not _ABSENT:
            found[name] = _as_python(value)
    return found


def _as_python(value: Any) -> Any:
    if type(value) is simdjson.Object:
        return value.as_dict()
    if type(value) is simdjson.Array:
        return value.as_list()
    return value
