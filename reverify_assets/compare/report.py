"""The comparison report: what ``--output`` writes as JSON and :mod:`markdown` renders.

Every figure stands next to the count it was computed from; a figure that cannot be given is null with
its reason beside it (JSON has no NaN).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from reverify_assets.compare.agreement import NoiseExcess
from reverify_assets.compare.breakdown import Breakdown
from reverify_assets.compare.figures import PairedFigures
from reverify_assets.compare.key_coverage import Coverage
from reverify_assets.compare.key_metrics import KeyMetricsComparison


class SideSummary(BaseModel):
    model_config = ConfigDict(frozen=True)

    path: str
    configs: dict[str, int]  # rows per verifier config hash; "original" for rows without provenance


class FlipsSummary(BaseModel):
    model_config = ConfigDict(frozen=True)

    path: str
    rows: int


class NoiseFloor(BaseModel):
    """The flips between the two sides against those a ``reverify noise`` report says noise alone gives."""

    model_config = ConfigDict(frozen=True)

    path: str
    verifier_config_hash: str  # the config the noise was measured with
    measured_on_a_side: bool  # that config scored rows of the baseline or the candidate
    scorings: int
    rows_measured: int
    fleiss_kappa: float | None
    excess: NoiseExcess


class CompareReport(BaseModel):
    model_config = ConfigDict(frozen=True)

    baseline: SideSummary
    candidate: SideSummary
    warnings: list[str]
    coverage: Coverage
    overall: PairedFigures  # of the compared rows (coverage.compared)
    key_metrics: KeyMetricsComparison
    breakdowns: list[Breakdown]  # agent_ref.name first, then each --by field
    flips: FlipsSummary | None  # None: no flips file was asked for
    noise: NoiseFloor | None = None  # None: no --noise report was given
