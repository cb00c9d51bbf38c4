"""What ``reverify probe`` finds: whether re-scoring stored rollouts with a config is sound, as evidence.

Two scorings of the same sample by servers started apart and fed in different orders: a server that needs state
the stored rollouts do not carry, or a nondeterministic judge, disagrees with itself; the rewards the rollouts
stored say whether the config still grades as the original run did (drift), when it is that run's config.
Pure: the counts, Cohen's κ (``paired_stats``) and the verdict; the probe itself is ``probe.two_passes``.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from reverify_assets.compare.paired_stats import Kappa, PassFailTable, cohens_kappa, first_non_binary

NON_BINARY = "no κ: a reward other than 0 or 1"
SHOWN_KEYS = 100  # disagreeing keys kept in the report, each way
# How a verdict begins: what a script (or the rescoring's check) reads of it.
CONSISTENT, DRIFTED, NOT_DETERMINISTIC, NO_EVIDENCE = (
    "CONSISTENT WITH STATELESS",
    "DETERMINISTIC, BUT DRIFTED",
    "NOT DETERMINISTIC",
    "NO EVIDENCE",
)


class PairAgreement(BaseModel):
    model_config = ConfigDict(frozen=True)

    rows: int
    agree: int
    rate: float | None  # agree / rows; None without rows
    kappa: Kappa | None
    kappa_omitted: str | None = None


class Disagreement(BaseModel):
    model_config = ConfigDict(frozen=True)

    task: int
    rollout: int
    first: float  # the first pass's reward (between passes), or the stored one (against the stored rewards)
    second: float


class ProbeReport(BaseModel):
    model_config = ConfigDict(frozen=True)

    kind: Literal["reverify_probe"] = "reverify_probe"
    verifier_config_hash: str
    reverify_modes: dict[str, str]  # what the servers declare
    separate_processes: bool  # False: a server reached by url answered both passes
    seed: int
    sampled_rows: int
    rows_by_agent: dict[str, int]
    failures_by_pass: list[int]
    scored_by_one_pass: int  # rows one pass scored and the other failed (or masked): a disagreement too
    between_passes: PairAgreement  # determinism
    with_stored: PairAgreement  # drift, when the config is the original run's
    stored_missing: int  # sampled rows whose rollout stored no numeric reward
    pass_disagreements: list[Disagreement]
    stored_disagreements: list[Disagreement]
    verdict: str
    created_at: str


def pair_agreement(first: np.ndarray, second: np.ndarray) -> PairAgreement:
    rows = int(first.size)
    agree = int(np.count_nonzero(first == second))
    if rows == 0:
        return PairAgreement(rows=0, agree=0, rate=None, kappa=None, kappa_omitted="no rows")
    both = np.concatenate([first, second])
    if first_non_binary(both) is not None:
        return PairAgreement(rows=rows, agree=agree, rate=agree / rows, kappa=None, kappa_omitted=NON_BINARY)
    kappa = cohens_kappa(PassFailTable.from_rewards(first, second))
    return PairAgreement(rows=rows, agree=agree, rate=agree / rows, kappa=kappa)


def verdict(
    between: PairAgreement, stored: PairAgreement, *, separate_processes: bool, scored_by_one_pass: int = 0
) -> str:
    """One line a user can act on."""
    where = "two separately started servers" if separate_processes else "one server reached by url, twice"
    if between.rows == 0 and not scored_by_one_pass:
        return f"{NO_EVIDENCE}: no sampled row was scored by both passes (see the failures)"
    if between.agree < between.rows or scored_by_one_pass:
        rows = between.rows + scored_by_one_pass
        once = f" ({scored_by_one_pass} scored by one pass only)" if scored_by_one_pass else ""
        return (
            f"{NOT_DETERMINISTIC}: {rows - between.agree} of {rows} rows got different rewards{once} from "
            f"{where} fed in different orders: the server keeps state the stored rollouts do not carry, or its "
            "judge is noisy (measure it with `reverify noise`); a rescore with it is not sound as it stands"
        )
    if stored.rows and stored.agree < stored.rows:
        return (
            f"{DRIFTED}: both passes agree on all {between.rows} rows, and "
            f"{stored.rows - stored.agree} of {stored.rows} differ from the rewards stored in the rollouts: expected "
            "if the config changed; with the original run's config, the server grades differently now (or needed "
            "state the rollouts lack)"
        )
    matched = f" and match the stored rewards on all {stored.rows}" if stored.rows else ""
    return (
        f"{CONSISTENT}: {where} agree on all {between.rows} rows in different orders{matched}; "
        "evidence, not proof, for the rows not sampled"
    )
