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


def present(values: Sequence[float]) -> list[float]:
    """The values that are not NaN, in order."""
    return [value for value in values if value == value]


def gapped_mean_std(values: Sequence[float]) -> tuple[float, float]:
    """``DataFrame.mean()`` and ``.std()`` (ddof=1) of one column: the gaps are summed as 0.0 in place;
    the mean is NaN without a value, the std with fewer than two."""
    count = sum(1 for value in values if value == value)
    if count == 0:
        return NAN, NAN
    filled = values if count == len(values) else [value if value == value else 0.0 for value in values]
    mean = numpy_sum(filled) / count
    if count - 1 <= 0:
        return mean, NAN
    squares = [(mean - value) * (mean - value) if value == value else 0.0 for value in values]
    return mean, math.sqrt(numpy_sum(squares) / (count - 1))


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
    return interpolate(float(ordered[below]), float(ordered[below + 1]), virtual - below)


def interpolate(low: float, high: float, gamma: float) -> float:
    """numpy's linear step from `low` to `high` (``_lerp``: from the nearer end, for monotonicity)."""
    diff = high - low
    if gamma >= 0.5:
        return high - diff * (1 - gamma)
    return low + diff * gamma


def confidence_interval(mean: float, standard_error: float, count: int) -> tuple[float, float] | None:
    """NeMo Gym's 95% Student-t interval: None for one value, the point ``(mean, mean)`` when the
    standard error is 0, else ``scipy.stats.t.interval(0.95, count - 1, loc=mean, scale=standard_error)``.

    That interval is ``t.ppf(q) * scale + loc`` at ``q = (1 -/+ 0.95) / 2``, and ``t._ppf`` is
    ``scipy.special.stdtrit(df, q)``: calling it directly gives the same bits without importing
    ``scipy.stats`` (over a second). NaN arguments give NaN either way.
    """
    if count <= 1:
        return None
    if standard_error == 0:
        return mean, mean
    from scipy.special import stdtrit

    df = float(count - 1)
    low = float(stdtrit(df, (1.0 - CONFIDENCE) / 2)) * standard_error + mean
    high = float(stdtrit(df, (1.0 + CONFIDENCE) / 2)) * standard_error + mean
    return low, high
