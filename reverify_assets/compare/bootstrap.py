"""A paired bootstrap interval of the mean reward change, resampling whole tasks.

The rollouts of one task share its question, so their changes are not independent: resampling rows one
by one would understate the spread. Each resample draws as many tasks as there are, with replacement,
and takes the mean change over all the rows of the tasks drawn. Pure maths, no I/O; seeded, so the same
rows and seed give the same interval.
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

CONFIDENCE = 0.95
# Task draws per block of resamples: bounds the temporary arrays (8 bytes a draw, a few MB) at any number of
# tasks; smaller blocks also stay in cache, which makes them faster than large ones.
DRAWS_PER_BLOCK = 1 << 18


class BootstrapSettings(BaseModel):
    model_config = ConfigDict(frozen=True)

    resamples: int = Field(ge=1)
    seed: int
    confidence: float = Field(default=CONFIDENCE, gt=0, lt=1)


class Interval(BaseModel):
    model_config = ConfigDict(frozen=True)

    low: float
    high: float
    confidence: float
    resamples: int
    seed: int
    tasks: int  # the number of units resampled


def task_totals(deltas: np.ndarray, tasks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per distinct task: the sum of its rows' changes and its number of rows."""
    _, of_row = np.unique(tasks, return_inverse=True)
    return np.bincount(of_row, weights=deltas), np.bincount(of_row).astype(np.float64)


def task_mean_deltas(deltas: np.ndarray, tasks: np.ndarray) -> np.ndarray:
    """Each distinct task's mean change over its rows, in task order: the units the interval resamples."""
    sums, counts = task_totals(deltas, tasks)
    return sums / counts


def resampled_means(deltas: np.ndarray, tasks: np.ndarray, settings: BootstrapSettings) -> np.ndarray:
    """The mean change of each resample (``settings.resamples`` of them)."""
    if deltas.size == 0:
        raise ValueError("a bootstrap of no rows")
    sums, counts = task_totals(deltas, tasks)
    rng = np.random.default_rng(settings.seed)
    per_block = max(1, DRAWS_PER_BLOCK // sums.size)
    means = np.empty(settings.resamples)
    for start in range(0, settings.resamples, per_block):
        stop = min(start + per_block, settings.resamples)
        drawn = rng.integers(0, sums.size, size=(stop - start, sums.size))
        means[start:stop] = sums[drawn].sum(axis=1) / counts[drawn].sum(axis=1)
    return means


def task_bootstrap_interval(deltas: np.ndarray, tasks: np.ndarray, settings: BootstrapSettings) -> Interval:
    """The percentile interval of the resampled means."""
    means = resampled_means(deltas, tasks, settings)
    tail = (1 - settings.confidence) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    return Interval(
        low=float(low),
        high=float(high),
        confidence=settings.confidence,
        resamples=settings.resamples,
        seed=settings.seed,
        tasks=int(np.unique(tasks).size),
    )
