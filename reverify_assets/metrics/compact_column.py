"""A growing column of numbers held in the narrowest exact form, a few thousand values at a time.

Metric columns are narrow: rewards are 0.0 / 1.0, token counts small integers, a task's avg-of-k a
quarter. Values are appended to a plain list (cheap: one ``list.extend`` per task) and every
:data:`CHUNK` of them are sealed into a numpy array of the narrowest dtype that gives every value back
exactly: int8 / int16 / int32 for integral values (the dtype's minimum standing for a gap), else
float16 / float32 / float64. So a row costs one to eight bytes per column, and never a Python object.

Reading back gives exactly what was appended: the narrow chunks (NaN, or an int dtype's minimum, for
MISSING and NaN), or, with ``keep_types``, the Python values themselves (an int stays an int, exactly up
to 2**53; MISSING stays MISSING): then a chunk also keeps one byte of kind per value, unless all its
values are floats.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

__all__ = ["CHUNK", "MISSING", "CompactColumn", "present"]


class _Missing:
    """A value that is not there (a gap in a column, a score a rollout does not have)."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()

CHUNK = 4096
_NAN = float("nan")
_INTS = (np.int8, np.int16, np.int32)
_FLOATS = (np.float16, np.float32)
# Kinds kept per value with keep_types.
_FLOAT, _INT, _GONE = 0, 1, 2


class CompactColumn:
    """Values (int, float or MISSING) appended in order."""

    __slots__ = ("_chunks", "_keep_types", "_kinds", "_pending", "_sealed")

    def __init__(self, keep_types: bool = False) -> None:
        self._keep_types = keep_types
        self._pending: list[Any] = []
        self._chunks: list[np.ndarray] = []
        self._kinds: list[np.ndarray | None] = []
        self._sealed = 0

    def __len__(self) -> int:
        return self._sealed + len(self._pending)

    def extend(self, values: Iterable[Any]) -> None:
        self._pending.extend(values)
        if len(self._pending) >= CHUNK:
            self._seal()

    def extend_missing(self, count: int) -> None:
        while count:
            take = min(count, CHUNK)
            self.extend([MISSING] * take)
            count -= take

    def chunks(self) -> Iterator[np.ndarray]:
        """The values in narrow arrays (see :func:`present`): chunk i holds values ``i * CHUNK`` on, so two
        columns of one length have chunks of the same lengths."""
        yield from self._chunks
        if self._pending:  # narrowed too: joined with the others, a float64 one would widen them all
            yield _narrow(_as_array(self._pending))

    def values(self) -> Iterator[Any]:
        """The values as appended (with ``keep_types``, ints stay ints and MISSING stays MISSING)."""
        for chunk, kinds in zip(self._chunks, self._kinds, strict=True):
            numbers = _widen(chunk).tolist()
            if kinds is None:
                yield from numbers
            else:
                yield from map(_from_kind, kinds.tolist(), numbers)
        yield from self._pending

    def _seal(self) -> None:
        pending = self._pending
        full = len(pending) - len(pending) % CHUNK
        for start in range(0, full, CHUNK):
            values = pending[start : start + CHUNK]
            self._chunks.append(_narrow(_as_array(values)))
            self._kinds.append(_kinds_of(values) if self._keep_types else None)
        self._pending = pending[full:]
        self._sealed += full


def present(chunk: np.ndarray) -> np.ndarray:
    """Where a chunk from :meth:`CompactColumn.chunks` holds a value (not MISSING, not NaN)."""
    if chunk.dtype.kind == "i":
        return chunk != np.iinfo(chunk.dtype).min
    return ~np.isnan(chunk)


def _as_array(values: list[Any]) -> np.ndarray:
    if MISSING in values:  # `in` compares by identity first: no number equals MISSING
        values = [_NAN if value is MISSING else value for value in values]
    return np.array(values, dtype=np.float64)


def _narrow(values: np.ndarray) -> np.ndarray:
    """`values` in the narrowest dtype that holds each of them exactly (see :func:`_widen`)."""
    gaps = np.isnan(values)
    kept = values[~gaps]
    if not len(kept):
        return np.full(len(values), np.iinfo(np.int8).min, dtype=np.int8)
    integral = np.array_equal(kept, np.trunc(kept)) and not np.signbit(kept[kept == 0]).any()
    if integral:
        low, high = kept.min(), kept.max()
        for dtype in _INTS:
            info = np.iinfo(dtype)
            if info.min < low and high <= info.max:  # the minimum is the gap
                return np.where(gaps, info.min, values).astype(dtype)
    for dtype in _FLOATS:
        with np.errstate(over="ignore"):
            narrow = values.astype(dtype)
        if np.array_equal(narrow.astype(np.float64), values, equal_nan=True):
            return narrow
    return values


def _widen(chunk: np.ndarray) -> np.ndarray:
    if chunk.dtype.kind == "i":
        wide = chunk.astype(np.float64)
        wide[chunk == np.iinfo(chunk.dtype).min] = _NAN
        return wide
    return chunk.astype(np.float64)


def _kinds_of(values: list[Any]) -> np.ndarray | None:
    if all(type(value) is float for value in values):
        return None
    return np.array(
        [_GONE if value is MISSING else _INT if type(value) is int else _FLOAT for value in values], dtype=np.int8
    )


def _from_kind(kind: int, value: float) -> Any:
    if kind == _GONE:
        return MISSING
    return int(value) if kind == _INT else value
