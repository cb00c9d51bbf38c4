"""How much a verifier agrees with itself: the statistics of K scorings of the same rows with one config.

Each row is an item and each scoring a rater; the categories are the distinct rewards seen (pass/fail for a
binary verifier). For a row scored K times with n_ij scorings in category j, its agreement is
P_i = (Σ_j n_ij² − K) / (K (K − 1)): the chance that two of its scorings, drawn without replacement, agree.

- Fleiss' κ = (P̄ − P_e) / (1 − P_e), P̄ the mean of P_i and P_e = Σ_j p_j² from the categories' shares over all
  scorings (undefined when every scoring fell in one category, P_e = 1).
- The noise flip rate, 1 − P̄: the chance that two scorings of a random row disagree. Between two configs that
  grade identically, this is the share of rows that would flip by noise alone.
- Against an observed number of flips between two configs over n rows, the flips noise alone would give are
  Binomial(n, rate): the report gives their mean, the 95 % upper bound and P(X ≥ observed), the one-sided
  chance that noise alone flips that many.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict
from scipy.stats import binom

KAPPA_UNDEFINED = "every scoring fell in one category: chance agreement is 1"


class SelfAgreement(BaseModel):
    model_config = ConfigDict(frozen=True)

    rows: int
    scorings: int  # K, per row
    categories: list[float]  # the distinct rewards seen
    unstable_rows: int  # rows whose K scorings did not all agree
    mean_agreement: float  # P̄
    chance_agreement: float  # P_e
    fleiss_kappa: float | None
    kappa_undefined_reason: str | None = None
    noise_flip_rate: float  # 1 − P̄


class NoiseExcess(BaseModel):
    """Observed flips between two configs, against those noise alone gives at the measured rate."""

    model_config = ConfigDict(frozen=True)

    rows: int
    observed_flips: int
    noise_flip_rate: float
    expected_noise_flips: float
    noise_flips_upper_95: int  # the 95th percentile of Binomial(rows, rate)
    flips_beyond_noise: float  # observed − expected, at least 0
    p_value: float  # P(X ≥ observed) under noise alone


def category_counts(ratings: Sequence[Sequence[float]]) -> tuple[np.ndarray, list[float]]:
    """(rows × categories) counts of each row's scorings, and the categories in ascending order. Every row must
    have been scored the same number of times."""
    lengths = {len(row) for row in ratings}
    if len(lengths) > 1:
        raise ValueError(f"every row needs the same number of scorings, got {sorted(lengths)}")
    categories = sorted({float(value) for row in ratings for value in row})
    column = {value: index for index, value in enumerate(categories)}
    counts = np.zeros((len(ratings), len(categories)), dtype=np.int64)
    for row_index, row in enumerate(ratings):
        for value in row:
            counts[row_index, column[float(value)]] += 1
    return counts, categories


def self_agreement(ratings: Sequence[Sequence[float]]) -> SelfAgreement:
    counts, categories = category_counts(ratings)
    rows, scorings = counts.shape[0], int(counts[0].sum()) if counts.size else 0
    if rows == 0 or scorings < 2:
        raise ValueError("self-agreement needs at least one row scored at least twice")
    per_row = ((counts**2).sum(axis=1) - scorings) / (scorings * (scorings - 1))
    mean_agreement = float(per_row.mean())
    shares = counts.sum(axis=0) / (rows * scorings)
    chance = float((shares**2).sum())
    kappa = None if chance >= 1.0 else (mean_agreement - chance) / (1.0 - chance)
    return SelfAgreement(
        rows=rows,
        scorings=scorings,
        categories=categories,
        unstable_rows=int((counts.max(axis=1) < scorings).sum()),
        mean_agreement=mean_agreement,
        chance_agreement=chance,
        fleiss_kappa=kappa,
        kappa_undefined_reason=KAPPA_UNDEFINED if kappa is None else None,
        noise_flip_rate=1.0 - mean_agreement,
    )


def noise_excess(observed_flips: int, rows: int, noise_flip_rate: float) -> NoiseExcess:
    expected = rows * noise_flip_rate
    return NoiseExcess(
        rows=rows,
        observed_flips=observed_flips,
        noise_flip_rate=noise_flip_rate,
        expected_noise_flips=expected,
        noise_flips_upper_95=int(binom.ppf(0.95, rows, noise_flip_rate)) if rows else 0,
        flips_beyond_noise=max(0.0, observed_flips - expected),
        p_value=float(binom.sf(observed_flips - 1, rows, noise_flip_rate)) if rows else 1.0,
    )
