"""The maths of ``reverify compare``: hand-worked 2×2 tables, statsmodels as an independent check, and
the task bootstrap."""

from __future__ import annotations

import math

import numpy as np
import pytest
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.inter_rater import cohens_kappa as statsmodels_kappa

from reverify_assets.compare import bootstrap
from reverify_assets.compare.bootstrap import BootstrapSettings, resampled_means, task_bootstrap_interval
from reverify_assets.compare.figures import NO_ROWS, paired_figures
from reverify_assets.compare.paired_stats import (
    KAPPA_UNDEFINED,
    PassFailTable,
    binary_figures,
    cohens_kappa,
    mcnemar_exact_p,
)


def table(both_pass: int, pass_to_fail: int, fail_to_pass: int, both_fail: int) -> PassFailTable:
    return PassFailTable(both_pass=both_pass, pass_to_fail=pass_to_fail, fail_to_pass=fail_to_pass, both_fail=both_fail)


@pytest.mark.parametrize(
    ("pass_to_fail", "fail_to_pass", "p"),
    [
        (0, 0, 1.0),  # no discordant pair
        (1, 0, 1.0),  # 2·P[X ≤ 0], X ~ B(1, ½) = 2·½
        (0, 5, 1 / 16),  # 2·(½)^5
        (5, 0, 1 / 16),  # symmetric
        (2, 8, 112 / 1024),  # 2·(1 + 10 + 45)/2^10
        (3, 12, 1152 / 32768),  # 2·(1 + 15 + 105 + 455)/2^15
        (5, 5, 1.0),  # 2·638/1024 > 1, capped
        (0, 39, 2.0**-38),
    ],
)
def test_mcnemar_exact_p_by_hand(pass_to_fail: int, fail_to_pass: int, p: float) -> None:
    assert mcnemar_exact_p(pass_to_fail, fail_to_pass) == pytest.approx(p, rel=1e-12)


@pytest.mark.parametrize(
    ("cells", "kappa", "observed", "expected"),
    [
        ((20, 5, 10, 15), 0.4, 0.7, 0.5),  # Cohen's κ's textbook example (Wikipedia)
        ((10, 0, 0, 10), 1.0, 1.0, 0.5),  # perfect agreement
        ((0, 5, 5, 0), -1.0, 0.0, 0.5),  # perfect disagreement
        ((0, 10, 0, 0), 0.0, 0.0, 0.0),  # baseline all pass, candidate all fail
        ((45, 15, 25, 15), 0.1304347826086956, 0.6, 0.54),  # po .6, pe (60·70 + 40·30)/100²
    ],
)
def test_cohens_kappa_by_hand(cells: tuple[int, int, int, int], kappa: float, observed: float, expected: float) -> None:
    result = cohens_kappa(table(*cells))
    assert result.value == pytest.approx(kappa, abs=1e-12)
    assert result.observed_agreement == pytest.approx(observed)
    assert result.expected_agreement == pytest.approx(expected)
    assert result.undefined_reason is None


@pytest.mark.parametrize("cells", [(10, 0, 0, 0), (0, 0, 0, 7)])
def test_kappa_is_null_with_a_reason_when_expected_agreement_is_one(cells: tuple[int, int, int, int]) -> None:
    result = cohens_kappa(table(*cells))
    assert result.value is None
    assert result.undefined_reason == KAPPA_UNDEFINED
    assert (result.observed_agreement, result.expected_agreement) == (1.0, 1.0)


def random_tables(count: int) -> list[tuple[int, int, int, int]]:
    rng = np.random.default_rng(11)
    tables = [tuple(int(v) for v in rng.integers(0, 60, size=4)) for _ in range(count)]
    # Small and lopsided ones too, where the exact test matters most.
    return [*tables, (1, 0, 3, 0), (0, 1, 0, 1), (100, 1, 9, 3), (7, 12, 0, 2), (500, 40, 61, 399)]


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # statsmodels z of a 0 spread
@pytest.mark.parametrize("cells", random_tables(30))
def test_against_statsmodels(cells: tuple[int, int, int, int]) -> None:
    both_pass, pass_to_fail, fail_to_pass, both_fail = cells
    counts = np.array([[both_pass, pass_to_fail], [fail_to_pass, both_fail]])
    ours = binary_figures(table(*cells))
    assert ours.mcnemar_p == pytest.approx(mcnemar(counts, exact=True).pvalue, rel=1e-9, abs=1e-300)
    theirs = statsmodels_kappa(counts).kappa
    if math.isnan(theirs):
        assert ours.kappa.value is None
    else:
        assert ours.kappa.value == pytest.approx(theirs, rel=1e-9, abs=1e-12)


def test_binary_figures_of_a_table() -> None:
    figures = binary_figures(table(20, 5, 10, 15))
    assert figures.flip_rate == pytest.approx(15 / 50)
    assert (figures.net_change, figures.net_change_rate) == (5, pytest.approx(0.1))
    assert figures.table.rows == 50


def test_table_from_rewards() -> None:
    baseline = np.array([1, 1, 0, 0, 1, 0], dtype=float)
    candidate = np.array([1, 0, 1, 0, 1, 1], dtype=float)
    assert PassFailTable.from_rewards(baseline, candidate) == table(2, 1, 2, 1)


# --- Bootstrap -----------------------------------------------------------------------------------------------


def correlated(tasks: int, rollouts: int, seed: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """Every rollout of a task changes alike: what makes resampling by task matter."""
    per_task = np.random.default_rng(seed).choice([-1.0, 0.0, 1.0], size=tasks)
    return np.repeat(per_task, rollouts), np.repeat(np.arange(tasks), rollouts)


def test_same_seed_same_interval_and_another_seed_another() -> None:
    deltas, tasks = correlated(40, 4)
    settings = BootstrapSettings(resamples=2000, seed=7)
    first, again = task_bootstrap_interval(deltas, tasks, settings), task_bootstrap_interval(deltas, tasks, settings)
    assert first == again
    other = task_bootstrap_interval(deltas, tasks, BootstrapSettings(resamples=2000, seed=8))
    assert (other.low, other.high) != (first.low, first.high)
    assert (first.resamples, first.seed, first.tasks, first.confidence) == (2000, 7, 40, 0.95)


@pytest.mark.parametrize("seed", range(5))
def test_interval_contains_the_mean(seed: int) -> None:
    rng = np.random.default_rng(seed)
    tasks = np.sort(rng.integers(0, 30, size=200))
    deltas = rng.choice([-1.0, 0.0, 0.0, 1.0, 0.5], size=200)
    interval = task_bootstrap_interval(deltas, tasks, BootstrapSettings(resamples=3000, seed=seed))
    assert interval.low <= deltas.mean() <= interval.high
    assert interval.low < interval.high


def test_tasks_are_resampled_whole() -> None:
    # Task 0: ten rows that all gained 1; task 1: ten rows unchanged. Drawing whole tasks, a resample's mean
    # is 0, ½ or 1; drawing rows one by one it would be any multiple of 1/20.
    deltas = np.array([1.0] * 10 + [0.0] * 10)
    tasks = np.array([0] * 10 + [1] * 10)
    means = resampled_means(deltas, tasks, BootstrapSettings(resamples=500, seed=1))
    assert set(np.unique(means)) <= {0.0, 0.5, 1.0}
    by_row = resampled_means(deltas, np.arange(20), BootstrapSettings(resamples=500, seed=1))
    assert not set(np.unique(by_row)) <= {0.0, 0.5, 1.0}


def test_resampling_by_task_widens_the_interval_of_correlated_rows() -> None:
    deltas, tasks = correlated(30, 8)
    settings = BootstrapSettings(resamples=4000, seed=2)
    whole = task_bootstrap_interval(deltas, tasks, settings)
    rows = task_bootstrap_interval(deltas, np.arange(deltas.size), settings)
    assert whole.high - whole.low > 2 * (rows.high - rows.low)


def test_a_resample_is_the_mean_over_the_rows_of_the_tasks_drawn() -> None:
    deltas = np.array([1.0, 1.0, 1.0, 0.0, -1.0, 0.5])
    tasks = np.array([3, 3, 3, 9, 9, 12])  # unequal sizes: the mean is per row, not per task
    settings = BootstrapSettings(resamples=1, seed=4)
    drawn = np.random.default_rng(4).integers(0, 3, size=(1, 3))[0]
    sums, counts = np.array([3.0, -1.0, 0.5]), np.array([3.0, 2.0, 1.0])
    assert resampled_means(deltas, tasks, settings)[0] == pytest.approx(sums[drawn].sum() / counts[drawn].sum())


def test_blocks_of_resamples_do_not_change_the_draws(monkeypatch: pytest.MonkeyPatch) -> None:
    deltas, tasks = correlated(25, 3)
    settings = BootstrapSettings(resamples=300, seed=9)
    whole = resampled_means(deltas, tasks, settings)
    monkeypatch.setattr(bootstrap, "DRAWS_PER_BLOCK", 25 * 7)
    assert np.array_equal(resampled_means(deltas, tasks, settings), whole)


# --- Figures ---------------------------------------------------------------------------------------------------


def test_no_rows_gives_reasons_not_figures() -> None:
    empty = np.array([], dtype=float)
    figures = paired_figures(empty, empty, np.array([], dtype=np.int64), BootstrapSettings(resamples=10, seed=0))
    assert (figures.rows, figures.tasks, figures.binary, figures.delta) == (0, 0, None, None)
    assert figures.binary_omitted == figures.delta_omitted == NO_ROWS


def test_non_binary_rewards_omit_the_table_but_keep_the_change() -> None:
    baseline = np.array([0.0, 0.5, 1.0, 1.0])
    candidate = np.array([1.0, 0.5, 0.25, 1.0])
    figures = paired_figures(baseline, candidate, np.array([0, 0, 1, 1]), BootstrapSettings(resamples=50, seed=0))
    assert figures.binary is None
    assert figures.binary_omitted is not None and "the baseline has 0.5" in figures.binary_omitted
    assert figures.delta is not None
    assert figures.delta.mean_delta == pytest.approx((1 - 0.75) / 4)
    assert figures.delta.mean_abs_delta == pytest.approx(1.75 / 4)
    assert figures.delta.changed == 2


def test_binary_rewards_give_every_figure() -> None:
    baseline = np.array([1.0, 0.0, 0.0, 1.0, 0.0])
    candidate = np.array([1.0, 1.0, 0.0, 0.0, 1.0])
    figures = paired_figures(baseline, candidate, np.array([0, 0, 1, 1, 2]), BootstrapSettings(resamples=100, seed=0))
    assert figures.binary is not None and figures.delta is not None
    assert figures.binary.table == table(1, 1, 2, 1)
    assert (figures.rows, figures.tasks, figures.delta.changed) == (5, 3, 3)
    assert figures.delta.mean_baseline == pytest.approx(0.4)
    assert figures.delta.mean_candidate == pytest.approx(0.6)
