"""Pass/fail agreement of two scorings of the same rows: the 2×2 table, McNemar's exact test, Cohen's κ.

Pure maths on counts, no I/O. The table's rows are the baseline, its columns the candidate.
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, ConfigDict

KAPPA_UNDEFINED = "undefined: expected agreement is 1 (both sides give every row the same single outcome), so κ is 0/0"


class PassFailTable(BaseModel):
    model_config = ConfigDict(frozen=True)

    both_pass: int
    pass_to_fail: int  # baseline 1, candidate 0
    fail_to_pass: int  # baseline 0, candidate 1
    both_fail: int

    @property
    def rows(self) -> int:
        return self.both_pass + self.pass_to_fail + self.fail_to_pass + self.both_fail

    @property
    def discordant(self) -> int:
        return self.pass_to_fail + self.fail_to_pass

    @classmethod
    def from_rewards(cls, baseline: np.ndarray, candidate: np.ndarray) -> PassFailTable:
        """Rewards that are all 0 or 1 (see :func:`first_non_binary`)."""
        passed, now_passes = baseline == 1, candidate == 1
        return cls(
            both_pass=int(np.count_nonzero(passed & now_passes)),
            pass_to_fail=int(np.count_nonzero(passed & ~now_passes)),
            fail_to_pass=int(np.count_nonzero(~passed & now_passes)),
            both_fail=int(np.count_nonzero(~passed & ~now_passes)),
        )


class Kappa(BaseModel):
    """Cohen's κ = (observed − expected) / (1 − expected); ``value`` is None (JSON null, never NaN) when the
    expected agreement is 1, with the reason in ``undefined_reason``."""

    model_config = ConfigDict(frozen=True)

    value: float | None
    undefined_reason: str | None = None
    observed_agreement: float
    expected_agreement: float


class BinaryFigures(BaseModel):
    model_config = ConfigDict(frozen=True)

    table: PassFailTable
    flip_rate: float  # discordant / rows
    net_change: int  # fail→pass − pass→fail, in rows
    net_change_rate: float  # net_change / rows
    mcnemar_p: float  # two-sided exact binomial test on the discordant pairs
    kappa: Kappa


def first_non_binary(rewards: np.ndarray) -> float | None:
    """A reward that is neither 0 nor 1, if any: the 2×2 figures need pass/fail rewards."""
    other = rewards[(rewards != 0) & (rewards != 1)]
    return float(other[0]) if other.size else None


def mcnemar_exact_p(pass_to_fail: int, fail_to_pass: int) -> float:
    """Two-sided exact McNemar p: under no change each discordant pair goes either way with probability ½,
    so p = min(1, 2·P[X ≤ min(b, c)]) for X ~ Binomial(b + c, ½); 1 when there is no discordant pair."""
    # Imported here: scipy.stats takes about a second, and `reverify run` loads this module (through the probe's
    # checks) without ever calling it.
    from scipy.stats import binom

    discordant = pass_to_fail + fail_to_pass
    if discordant == 0:
        return 1.0
    return min(1.0, 2.0 * float(binom.cdf(min(pass_to_fail, fail_to_pass), discordant, 0.5)))


def cohens_kappa(table: PassFailTable) -> Kappa:
    n = table.rows
    if n == 0:
        raise ValueError("Cohen's κ of an empty table")
    agree = table.both_pass + table.both_fail
    baseline_pass, candidate_pass = table.both_pass + table.pass_to_fail, table.both_pass + table.fail_to_pass
    # Sums of marginal products in integers: κ = (n·agree − S) / (n² − S) is then exact up to one division.
    chance = baseline_pass * candidate_pass + (n - baseline_pass) * (n - candidate_pass)
    observed, expected = agree / n, chance / (n * n)
    if chance == n * n:
        return Kappa(
            value=None, undefined_reason=KAPPA_UNDEFINED, observed_agreement=observed, expected_agreement=expected
        )
    return Kappa(
        value=(n * agree - chance) / (n * n - chance), observed_agreement=observed, expected_agreement=expected
    )


def binary_figures(table: PassFailTable) -> BinaryFigures:
    n = table.rows
    if n == 0:
        raise ValueError("pass/fail figures of an empty table")
    net = table.fail_to_pass - table.pass_to_fail
    return BinaryFigures(
        table=table,
        flip_rate=table.discordant / n,
        net_change=net,
        net_change_rate=net / n,
        mcnemar_p=mcnemar_exact_p(table.pass_to_fail, table.fail_to_pass),
        kappa=cohens_kappa(table),
    )
