"""Self-agreement of K scorings: hand-worked cases, and statsmodels' Fleiss' κ as an independent check."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from scipy.stats import binom, norm
from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

from reverify_assets.compare.agreement import KAPPA_UNDEFINED, category_counts, noise_excess, self_agreement


@pytest.mark.parametrize(
    ("ratings", "unstable", "flip_rate"),
    [
        ([[1, 1, 1], [0, 0, 0]], 0, 0.0),
        ([[1, 1, 0], [0, 0, 0]], 1, (1 - 1 / 3) / 2),  # row 1 agrees in 1 of its 3 pairs
        ([[1, 0], [0, 1], [1, 1], [0, 0]], 2, 0.5),
        ([[0.5, 0.5, 1.0], [0.0, 0.0, 0.0]], 1, (1 - 1 / 3) / 2),  # rewards other than 0 and 1 are categories too
    ],
)
def test_hand_worked(ratings: list[list[float]], unstable: int, flip_rate: float) -> None:
    agreement = self_agreement(ratings)
    assert agreement.unstable_rows == unstable
    assert agreement.noise_flip_rate == pytest.approx(flip_rate)
    assert agreement.rows == len(ratings) and agreement.scorings == len(ratings[0])


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("scorings", [2, 3, 5])
def test_fleiss_kappa_is_statsmodels(seed: int, scorings: int) -> None:
    draw = random.Random(seed)
    flip = draw.uniform(0.0, 0.4)
    truth = [draw.choice([0.0, 1.0, 0.5]) for _ in range(draw.randint(5, 60))]
    ratings = [[value if draw.random() > flip else draw.choice([0.0, 1.0]) for _ in range(scorings)] for value in truth]
    ours = self_agreement(ratings)
    table, _ = aggregate_raters(np.array(ratings))
    if ours.fleiss_kappa is None:
        pytest.skip("every scoring in one category")
    assert ours.fleiss_kappa == pytest.approx(fleiss_kappa(table, method="fleiss"))


def test_one_category_leaves_kappa_undefined() -> None:
    agreement = self_agreement([[1, 1], [1, 1]])
    assert agreement.fleiss_kappa is None and agreement.kappa_undefined_reason == KAPPA_UNDEFINED
    assert agreement.noise_flip_rate == 0.0


@pytest.mark.parametrize(
    ("ratings", "message"),
    [([[1], [0]], "at least twice"), ([], "at least one row"), ([[1, 0], [1]], "same number of scorings")],
)
def test_what_has_no_self_agreement(ratings: list[list[float]], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        self_agreement(ratings)


def test_category_counts() -> None:
    counts, categories = category_counts([[1.0, 0.0, 1.0], [0.5, 0.5, 0.5]])
    assert categories == [0.0, 0.5, 1.0]
    assert counts.tolist() == [[1, 0, 2], [0, 3, 0]]


@pytest.mark.parametrize(("observed", "rows", "rate"), [(0, 100, 0.05), (5, 100, 0.05), (20, 100, 0.05), (3, 10, 0.5)])
def test_noise_excess_of_a_known_rate_is_the_binomials(observed: int, rows: int, rate: float) -> None:
    excess = noise_excess(observed, rows, rate, 0.0)
    assert excess.expected_noise_flips == pytest.approx(rows * rate)
    assert excess.flips_beyond_noise == pytest.approx(max(0.0, observed - rows * rate))
    assert excess.p_value == pytest.approx(sum(binom.pmf(k, rows, rate) for k in range(observed, rows + 1)))
    upper = excess.noise_flips_upper_95
    assert binom.cdf(upper, rows, rate) >= 0.95 > binom.cdf(upper - 1, rows, rate)


def test_a_measured_rate_widens_what_noise_alone_gives() -> None:
    """600 flips in 10,000 rows against a rate of 5.7 % measured with a standard error of 0.8 %: the binomial
    alone would call 600 significant; with the rate's own error it is well within the noise."""
    known, measured = noise_excess(613, 10_000, 0.0573, 0.0), noise_excess(613, 10_000, 0.0573, 0.008)
    assert known.p_value < 0.05 < measured.p_value
    spread = math.sqrt(10_000 * 0.0573 * (1 - 0.0573) + (10_000 * 0.008) ** 2)
    assert measured.p_value == pytest.approx(norm.sf((613 - 0.5 - 573.0) / spread))
    assert measured.noise_flips_upper_95 == math.ceil(573.0 + norm.ppf(0.95) * spread)
    assert known.noise_flips_upper_95 < measured.noise_flips_upper_95


@pytest.mark.parametrize(
    ("ratings", "se"),
    [
        ([[1, 1], [0, 0]], 0.0),
        ([[1, 0], [1, 1], [0, 0], [0, 0]], float(np.std([1, 0, 0, 0], ddof=1) / 2)),
    ],
)
def test_the_rates_standard_error_is_over_the_rows(ratings: list[list[float]], se: float) -> None:
    assert self_agreement(ratings).noise_flip_rate_se == pytest.approx(se)
