"""Float sums that give the same bits as the two summations NeMo Gym's numbers come from.

NeMo Gym computes its pass@k family with Python's builtin ``sum`` on Python >= 3.13, and its
reward-profile statistics with pandas, which sums through numpy. Neither is the naive left-to-right
loop that Python 3.11's ``sum`` is, so a plain ``sum`` here would drift in the last bits:

* :func:`python_sum` is CPython >= 3.12's builtin ``sum``: integers are added exactly until the first
  float, floats are then added with Neumaier compensation, and integers met after that are added
  without compensation. :class:`RunningSum` is the same sum fed in pieces.
* :func:`numpy_sum` is numpy's float64 ``add.reduce``: the identity 0.0 plus numpy's pairwise sum
  (eight running accumulators over blocks of at most 128 values, halves above that). It is the cheap way
  for a handful of values; long columns go to ``numpy.add.reduce`` itself (see :mod:`column_scan`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from functools import reduce
from operator import add

Number = int | float

_PAIRWISE_BLOCK = 128
_UNROLL = 8


class RunningSum:
    """CPython >= 3.12's builtin ``sum`` as a running state, so a long sum can be fed in pieces.

    Integers are added exactly until the first float; floats are then added with Neumaier compensation,
    and integers met after that are added without compensation. The compensation is applied only when the
    total is read, so reading does not disturb the state.
    """

    __slots__ = ("_compensation", "_int_total", "_total")

    def __init__(self) -> None:
        self._int_total: int = 0
        self._total: float | None = None  # None until the first float
        self._compensation = 0.0

    def extend(self, values: Iterable[Number]) -> RunningSum:
        items = iter(values)
        total = self._total
        if total is None:
            int_total = self._int_total
            for value in items:
                if type(value) is float:
                    total = float(int_total) + value
                    break
                int_total += value
            self._int_total = int_total
            if total is None:
                return self
        compensation = self._compensation
        for value in items:
            if not value:
                # A zero changes neither the total nor the compensation once floats are being added (neither
                # is ever -0.0: it starts as float(int) + value and only x + y = -0.0 when both are -0.0).
                continue
            if type(value) is float:
                running = total + value
                if abs(total) >= abs(value):
                    compensation += (total - running) + value
                else:
                    compensation += (value - running) + total
                total = running
            else:
                total += float(value)
        self._total = total
        self._compensation = compensation
        return self

    @property
    def total(self) -> Number:
        if self._total is None:
            return self._int_total
        if self._compensation and math.isfinite(self._compensation):
            return self._total + self._compensation
        return self._total


def python_sum(values: Iterable[Number]) -> Number:
    """``sum(values)`` exactly as CPython >= 3.12 computes it, on any Python version."""
    return RunningSum().extend(values).total


def _pairwise(values: Sequence[float], start: int, count: int) -> float:
    if count < _UNROLL:
        return reduce(add, values[start : start + count], 0.0)
    if count <= _PAIRWISE_BLOCK:
        unrolled_end = start + count - count % _UNROLL
        lanes = [reduce(add, values[start + lane : unrolled_end : _UNROLL]) for lane in range(_UNROLL)]
        total = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]))
        return reduce(add, values[unrolled_end : start + count], total)
    half = count // 2
    half -= half % _UNROLL
    return _pairwise(values, start, half) + _pairwise(values, start + half, count - half)


def numpy_sum(values: Sequence[float]) -> float:
    """``numpy.add.reduce`` of a contiguous float64 array holding ``values``."""
    return 0.0 + _pairwise(values, 0, len(values))
