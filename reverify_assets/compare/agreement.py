"""How much a verifier agrees with itself: the statistics of K scorings of the same rows with one config.

Each row is an item and each scoring a rater; the categories are the distinct rewards seen (pass/fail for a
binary verifier). For a row scored K times with n_ij scorings in category j, its agreement is
P_i = (Σ_j n_ij² − K) / (K (K − 1)): the chance that two of its scorings, drawn without replacement, agree.

- Fleiss' κ = (P̄ − P_e) / (1 − P_e), P̄ the mean of P_i and P_e = Σ_j p_j² from the categories' shares over all
  scorings (undefined when every scoring fell in one category, P_e = 1).
- The noise flip rate, 1 − P̄: the chance that two scorings of a random row disagree. Between two configs that
  grade identically, this is the share of rows that would flip by noise alone.
- Against an observed number of flips between two configs over n rows, the flips noise alone would give: n·rate
  on average. The rate is itself measured on a sample, with standard error se (of the rows' 1 − P_i), and that
  uncertainty dominates at a few hundred sampled rows: the flips are taken as Binomial(n, r) with r itself
  uncertain, variance n·r(1 − r) + n²·se², and the report gives the 95 % upper bound and P(X ≥ observed) from
  the normal approximation with that variance (continuity-corrected). With se = 0 (every sampled row agreed
  with itself, or one row) it is the binomial's own tail.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict

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
    noise_flip_rate_se: float  # its standard error over the sampled rows


class NoiseExcess(BaseModel):
    """Observed flips between two configs, against those noise alone gives at the measured rate."""

    model_config = ConfigDict(frozen=True)

    rows: int
    observed_flips: int
    noise_flip_rate: float
    noise_flip_rate_se: float
    expected_noise_flips: float
    noise_flips_upper_95: int  # what noise alone stays within 95 % of the time
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
        noise_flip_rate_se=float(np.std(1.0 - per_row, ddof=1) / np.sqrt(rows)) if rows > 1 else 0.0,
    )


def noise_excess(observed_flips: int, rows: int, noise_flip_rate: float, noise_flip_rate_se: float) -> NoiseExcess:
    from scipy.stats import binom, norm  # here: about a second to import, for `reverify noise` alone

    expected = rows * noise_flip_rate
    if rows == 0:
        upper, p_value = 0, 1.0
    elif noise_flip_rate_se == 0:
        upper = int(binom.ppf(0.95, rows, noise_flip_rate))
        p_value = float(binom.sf(observed_flips - 1, rows, noise_flip_rate))
    else:
        spread = math.sqrt(rows * noise_flip_rate * (1 - noise_flip_rate) + (rows * noise_flip_rate_se) ** 2)
        upper = math.ceil(expected + norm.ppf(0.95) * spread)
        p_value = float(norm.sf((observed_flips - 0.5 - expected) / spread)) if observed_flips else 1.0
    return NoiseExcess(
        rows=rows,
        observed_flips=observed_flips,
        noise_flip_rate=noise_flip_rate,
        noise_flip_rate_se=noise_flip_rate_se,
        expected_noise_flips=expected,
        noise_flips_upper_95=upper,
        flips_beyond_noise=max(0.0, observed_flips - expected),
        p_value=p_value,
    )
