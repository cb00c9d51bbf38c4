"""Statistics of one column of numbers, computed the way pandas / numpy / scipy compute them.

Missing values are NaN. Two flavours exist because NeMo Gym uses pandas two ways:

* over a *gapped* column (``DataFrame.mean()`` / ``.std()``): the gaps are summed as 0.0 in place, so
  they still shape numpy's pairwise grouping;
* over a *compacted* column (``Series.dropna()`` first): the gaps are removed before summing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from reverify_assets.metrics.summation import numpy_sum

CONFIDENCE = 0.95
NAN = float("nan")


def is_missing(value: float) -> bool:
    return value != value  # NaN


def present(values: Sequence[float]) -> list[float]:
    """The values that are not NaN, in order."""
    return [value for value in values if value == value]


def gapped_mean(values: Sequence[float]) -> float:
    """``DataFrame.mean()`` of one column: NaN when every value is missing."""
    filled, count = _zero_filled(values)
    if count == 0:
        return NAN
    return numpy_sum(filled) / count


def gapped_std(values: Sequence[float]) -> float:
    """``DataFrame.std()`` (ddof=1) of one column: NaN with fewer than two values."""
    filled, count = _zero_filled(values)
    if count - 1 <= 0:
        return NAN
    average = numpy_sum(filled) / count
    squares = [0.0 if is_missing(value) else (average - value) * (average - value) for value in values]
    return math.sqrt(numpy_sum(squares) / (count - 1))


def compact_mean(values: Sequence[float]) -> float:
    """``Series.mean()`` of values with no NaN (at least one)."""
    return numpy_sum(values) / len(values)


def compact_std(values: Sequence[float]) -> float:
    """``Series.std(ddof=1)`` of values with no NaN, or 0.0 for a single value (NeMo Gym's choice)."""
    count = len(values)
    if count <= 1:
        return 0.0
    average = numpy_sum(values) / count
    return math.sqrt(numpy_sum([(average - value) * (average - value) for value in values]) / (count - 1))


def median(values: Sequence[float]) -> float:
    """``numpy.median`` of values with no NaN (at least one): the mean of the two middle values when even."""
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return 0.0 + ordered[middle]
    return (0.0 + ordered[middle - 1] + ordered[middle]) / 2


def quantile(values: Sequence[float], q: float) -> float:
    """``numpy.quantile(values, q)`` with the default 'linear' method (values with no NaN, at least one)."""
    ordered = sorted(values)
    last = len(ordered) - 1
    virtual = last * q
    if virtual >= last:
        return float(ordered[-1])
    below = math.floor(virtual)
    gamma = virtual - below
    low, high = float(ordered[below]), float(ordered[below + 1])
    diff = high - low
    if gamma >= 0.5:
        return high - diff * (1 - gamma)
    return low + diff * gamma


def confidence_interval(mean: float, standard_error: float, count: int) -> tuple[float, float] | None:
    """NeMo Gym's 95% Student-t interval: None for one value, the point ``(mean, mean)`` when the
    standard error is 0, else ``scipy.stats.t.interval(0.95, count - 1, loc=mean, scale=standard_error)``."""
    if count <= 1:
        return None
    if standard_error == 0:
        return mean, mean
    from scipy import stats

    low, high = stats.t.interval(CONFIDENCE, df=count - 1, loc=mean, scale=standard_error)
    return float(low), float(high)


def _zero_filled(values: Sequence[float]) -> tuple[Sequence[float], int]:
    missing = sum(1 for value in values if is_missing(value))
    if not missing:
        return values, len(values)
    return [0.0 if is_missing(value) else value for value in values], len(values) - missing
