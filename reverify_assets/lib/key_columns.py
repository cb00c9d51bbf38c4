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
and check its key (``keys.check_indexed_key``).

Nothing here imports polars: the start-up's scan process (``key_scan_process``) runs this beside Dagster's
import, and starts the sooner for it.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

import simdjson

from reverify_assets.lib.keys import ROLLOUT_FIELD, TASK_FIELD
from reverify_assets.lib.rollout_identity import PromptShape
from reverify_assets.lib.route_fields import ROUTE_FIELDS, RouteTable

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

    @property
    def arrays(self) -> tuple[array[int], ...]:
        """The columns: tasks, rollouts, offsets, then the prompts and the route numbers if there are any."""
        return tuple(
            values
            for values in (self.tasks, self.rollouts, self.offsets, self.prompts, self.route_of_row)
            if values is not None
        )


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
) -> Iterator[KeyColumns]:
    """``scan_key_columns`` a block of lines at a time, so that a caller need not hold every row's columns:
    each block's columns, its rows' route numbers in ``routes`` (which numbers the whole file's routes) if
    given, their prompts' fingerprints if ``prompts``. Raises ExactScanNeeded instead of answering None.

    The inputs' rows (scanned with ``routes``) that repeat their task's row are not fingerprinted again
    (``_RepeatedPrompts``)."""
    parser = simdjson.Parser()
    route_ids = None if routes is None else _RouteIds(routes)
    prompt_of = _prompt_fingerprints(in_key_order=routes is not None) if prompts else None
    rows_left = -1 if limit is None else limit
    offset = 0
    try:
        for lines in _lines_by_block(path):
            tasks, rollouts, offsets = array("q"), array("q"), array("q")
            fingerprints: array[int] | None = array("q") if prompts else None
            route_of_row: array[int] | None = None if route_ids is None else array("i")
            for raw in lines:
                if rows_left == 0:
                    break
                rows_left -= 1
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
                if route_ids is not None and route_of_row is not None:
                    route_of_row.append(route_ids.of(row))
                if fields is not None:
                    fields.see(_picked(row, fields.names))
                if fingerprints is not None and prompt_of is not None:
                    fingerprints.append(prompt_of(row, raw, task))
                del row  # the parser refuses to parse again while a row of the last parse is alive
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


def _lines_by_block(path: Path) -> Iterator[list[bytes]]:
    """The file's lines without their line breaks (a ``\\r`` before one is JSON whitespace), a block at a time:
    the file is read in pieces of ``BLOCK_BYTES``, never whole."""
    with open(path, "rb") as fh:
        carry: list[bytes] = []  # the start of a line that runs on into the next piece (joined once, when whole)
        while piece := fh.read(BLOCK_BYTES):
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


def _prompt_fingerprints(*, in_key_order: bool) -> Callable[[simdjson.Object, bytes, int], int]:
    """A scan's ``prompt_fingerprint`` of a row, given its bytes and task too."""
    if in_key_order:
        return _RepeatedPrompts().of
    shape = PromptShape()
    return lambda row, _raw, _task: shape.fingerprint(row)


class _RepeatedPrompts:
    """The materialized inputs' ``prompt_fingerprint``s (``PromptShape``'s), computed once a task.

    NeMo Gym writes the materialized inputs in key order, ``responses_create_params`` first, a task's row repeated
    once a rollout up to its last field, ``_ng_rollout_index``: a row of the task before that starts with that
    row's bytes up to there has its prompt. At 4 rollouts a task, a million rows' fingerprints cost 0.5 s of CPU,
    where fingerprinting every row cost 1.4 s. (The rollouts are in completion order, a task's rows scattered:
    each is fingerprinted. Hashing their requests' bytes to know a task's again cost more than it saved.)"""

    def __init__(self) -> None:
        self._shape = PromptShape()
        self._task, self._head, self._fingerprint = -1, b"", 0  # the last row fingerprinted, and its bytes

    def of(self, row: simdjson.Object, raw: bytes, task: int) -> int:
        if task == self._task and raw.startswith(self._head):
            return self._fingerprint
        fingerprint = self._shape.fingerprint(row)
        # From the end: the key is the row's last field (4 times faster than from the start).
        cut = raw.rfind(_ROLLOUT_INDEX) if raw.startswith(_REQUEST_FIRST) else -1
        self._task, self._head = (task, raw[:cut]) if cut > 0 else (-1, b"")
        self._fingerprint = fingerprint
        return fingerprint


_REQUEST_FIRST = b'{"responses_create_params":'
_ROLLOUT_INDEX = b'"_ng_rollout_index":'


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
