"""The probe's agreement figures and verdicts, and the stratified sample it draws."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from reverify_assets.probe.repeated_scoring import sample_plan
from reverify_assets.probe.report import NON_BINARY, pair_agreement, verdict


@pytest.mark.parametrize(
    ("first", "second", "agree", "kappa"),
    [
        ([1, 0, 1, 0], [1, 0, 1, 0], 4, 1.0),
        ([1, 0, 1, 0], [0, 1, 0, 1], 0, -1.0),
        ([1, 1, 0, 0], [1, 0, 0, 0], 3, 0.5),
    ],
)
def test_pair_agreement(first: list[float], second: list[float], agree: int, kappa: float) -> None:
    made = pair_agreement(np.array(first, dtype=float), np.array(second, dtype=float))
    assert made.rows == len(first) and made.agree == agree and made.rate == agree / len(first)
    assert made.kappa is not None and made.kappa.value == pytest.approx(kappa)


def test_rewards_other_than_0_and_1_have_no_kappa() -> None:
    made = pair_agreement(np.array([0.5, 1.0]), np.array([0.5, 0.0]))
    assert made.agree == 1 and made.kappa is None and made.kappa_omitted == NON_BINARY


def agreement(agree: int, rows: int) -> object:
    return pair_agreement(np.array([1.0] * rows), np.array([1.0] * agree + [0.0] * (rows - agree)))


@pytest.mark.parametrize(
    ("between", "stored", "separate", "start"),
    [
        ((10, 10), (10, 10), True, "CONSISTENT WITH STATELESS: two separately started servers agree on all 10"),
        ((10, 10), (0, 0), True, "CONSISTENT WITH STATELESS"),
        ((10, 10), (7, 10), True, "DETERMINISTIC, BUT DRIFTED: both passes agree on all 10 rows, and 3 of 10"),
        ((8, 10), (10, 10), True, "NOT DETERMINISTIC: 2 of 10 rows got different rewards from two separately"),
        ((8, 10), (10, 10), False, "NOT DETERMINISTIC: 2 of 10 rows got different rewards from one server"),
        ((0, 0), (0, 0), True, "NO EVIDENCE"),
    ],
)
def test_verdicts(between: tuple[int, int], stored: tuple[int, int], separate: bool, start: str) -> None:
    said = verdict(agreement(*between), agreement(*stored), separate_processes=separate)  # type: ignore[arg-type]
    assert said.startswith(start), said


def test_a_row_scored_by_one_pass_only_is_a_disagreement() -> None:
    said = verdict(agreement(10, 10), agreement(10, 10), separate_processes=True, scored_by_one_pass=2)  # type: ignore[arg-type]
    assert said.startswith("NOT DETERMINISTIC: 2 of 12 rows got different rewards (2 scored by one pass only)")


def test_a_stratified_sample_gives_each_agent_its_share_and_a_small_one_a_row() -> None:
    agents = ["big"] * 900 + ["mid"] * 95 + ["tiny"] * 5
    plan = pl.DataFrame({"task": list(range(1000)), "rollout": [0] * 1000, "agent": agents})
    sample = sample_plan(plan, 100, seed=1, strata="agent")
    counts = dict(sample.group_by("agent").len().iter_rows())
    assert counts == {"big": 90, "mid": 10, "tiny": 1}  # 0.5 of a row rounds to none: it still gets one
    assert sample["task"].is_sorted() and sample_plan(plan, 100, seed=1, strata="agent").equals(sample)
    assert not sample_plan(plan, 100, seed=2, strata="agent").equals(sample)
    assert sample_plan(plan, 5000, seed=1, strata="agent").height == 1000
