"""Statistics of whole columns (see :mod:`compact_column`), read a chunk at a time.

Same bits as the list versions in :mod:`column_stats`, because they are what numpy computes for pandas:
sums are ``numpy.add.reduce`` (fed block by block, see :mod:`blocked_sum`), element-wise arithmetic
rounds exactly like Python's, and a median, quantile, max or min only picks order statistics, found in
the chunks' narrow dtypes (every one of which converts to float exactly) before the same scalar arithmetic.
Temporaries are one chunk or block of float64, plus the present values of one column in its narrow dtype.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import NamedTuple

import numpy as np

from reverify_assets.metrics import column_stats as cs
from reverify_assets.metrics.blocked_sum import BlockedSum
from reverify_assets.metrics.compact_column import CompactColumn, present
from reverify_assets.metrics.describe import Summary


def gapped_summary(column: CompactColumn) -> Summary | None:
    """The describe statistics of a whole column (NeMo Gym's ``DataFrame`` ones: gaps are summed as 0.0
    in place, see :func:`column_stats.gapped_mean_std`); None when it has no value."""
    count = len(column)
    total = BlockedSum(count)
    chunks = list(column.chunks())
    values = np.empty(count, dtype=np.result_type(*chunks) if chunks else np.float64)
    found = 0
    for chunk in chunks:
        filled, where = _filled(chunk)
        total.feed(filled)
        kept = chunk[where]
        values[found : found + len(kept)] = kept
        found += len(kept)
    values = values[:found]
    if not found:
        return None
    mean = total.total() / len(values)
    std = cs.NAN
    if len(values) > 1:
        squares = BlockedSum(count)
        for chunk in chunks:
            filled, where = _filled(chunk)
            deviations = _squared_deviations(mean, filled)
            deviations[~where] = 0.0
            squares.feed(deviations)
        std = math.sqrt(squares.total() / (len(values) - 1))
    return Summary(mean, float(values.max()), float(values.min()), median(values), std, len(values) == count)


class CompactStats(NamedTuple):
    """Over values with no gap (a repeat's): NeMo Gym's ``Series`` statistics."""

    count: int
    mean: float
    median: float
    std: float
    min: float
    max: float
    p25: float
    p75: float


def compact_stats(pieces: Sequence[np.ndarray]) -> CompactStats | None:
    """The statistics of the values of `pieces` (narrow arrays, no gap) one after the other; None if
    there is none. std is 0.0 for a single value (NeMo Gym's choice)."""
    count = sum(len(piece) for piece in pieces)
    if not count:
        return None
    mean = _sum(pieces, count) / count
    std = 0.0
    if count > 1:
        std = math.sqrt(_sum((_squared_deviations(mean, _float(piece)) for piece in pieces), count) / (count - 1))
    values = _joined(pieces)
    return CompactStats(
        count,
        mean,
        median(values),
        std,
        float(values.min()),
        float(values.max()),
        quantile(values, 0.25),
        quantile(values, 0.75),
    )


def median(values: np.ndarray) -> float:
    """:func:`column_stats.median` (values with no gap, at least one; reordered in place)."""
    middle = len(values) // 2
    if len(values) % 2:
        values.partition(middle)
        return 0.0 + float(values[middle])
    values.partition((middle - 1, middle))
    return (0.0 + float(values[middle - 1]) + float(values[middle])) / 2


def quantile(values: np.ndarray, q: float) -> float:
    """:func:`column_stats.quantile` (values with no gap, at least one; reordered in place)."""
    last = len(values) - 1
    virtual = last * q
    if virtual >= last:
        return float(values.max())
    below = math.floor(virtual)
    values.partition((below, below + 1))
    return cs.interpolate(float(values[below]), float(values[below + 1]), virtual - below)


def _float(chunk: np.ndarray) -> np.ndarray:
    return chunk.astype(np.float64)


def _filled(chunk: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The chunk as float64 with its gaps 0.0, and where its values are."""
    where = present(chunk)
    values = _float(chunk)
    values[~where] = 0.0
    return values, where


def _squared_deviations(mean: float, values: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", over="ignore"):  # infinities: NaN and overflow, as in Python
        deviations = mean - values
        deviations *= deviations
    return deviations


def _sum(pieces: Iterable[np.ndarray], count: int) -> float:
    total = BlockedSum(count)
    for piece in pieces:
        total.feed(_float(piece))
    return total.total()


def _joined(pieces: Sequence[np.ndarray]) -> np.ndarray:
    """One array of the pieces' values, in a dtype that holds each of them exactly (numpy promotes to one)."""
    if not pieces:
        return np.empty(0)
    return np.concatenate(pieces) if len(pieces) > 1 else pieces[0].copy()
