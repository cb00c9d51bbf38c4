"""What ``reverify noise`` writes: a verifier config's self-agreement over a sample, and what reads it back."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from reverify_assets.compare.agreement import SelfAgreement, noise_excess
from reverify_assets.compare.report import CompareReport, NoiseFloor
from reverify_assets.errors import InputError


class ScoredRow(BaseModel):
    model_config = ConfigDict(frozen=True)

    task: int
    rollout: int
    rewards: list[float]  # one per scoring, in scoring order


class NoiseReport(BaseModel):
    model_config = ConfigDict(frozen=True)

    kind: Literal["reverify_noise"] = "reverify_noise"
    verifier_config_hash: str
    inputs: str
    rollouts: str
    seed: int
    sampled_rows: int
    scorings: int
    rows_scored_every_time: int  # the rows the statistics are over: a row that failed once is left out
    failures_by_scoring: list[int]
    agreement: SelfAgreement
    rows: list[ScoredRow]  # in key order, the rows the statistics are over


def read_noise_report(path: Path) -> NoiseReport:
    try:
        text = path.read_bytes()
    except OSError as exc:
        raise InputError(f"--noise {path}: cannot read it ({exc.strerror or exc})", path=path) from None
    try:
        return NoiseReport.model_validate_json(text)
    except ValidationError as exc:
        problem = exc.errors()[0]
        where = ".".join(str(part) for part in problem["loc"]) or "the file"
        raise InputError(
            f"--noise {path} is not a report of `reverify noise`: {where}: {problem['msg']}", path=path
        ) from None


def with_noise_floor(report: CompareReport, noise: NoiseReport, path: Path) -> CompareReport:
    """``report`` with its changed rows set against ``noise``'s flip rate."""
    changed = report.overall.delta.changed if report.overall.delta is not None else 0
    configs = {*report.baseline.configs, *report.candidate.configs}
    floor = NoiseFloor(
        path=str(path),
        verifier_config_hash=noise.verifier_config_hash,
        measured_on_a_side=noise.verifier_config_hash in configs,
        scorings=noise.scorings,
        rows_measured=noise.rows_scored_every_time,
        fleiss_kappa=noise.agreement.fleiss_kappa,
        excess=noise_excess(
            changed, report.overall.rows, noise.agreement.noise_flip_rate, noise.agreement.noise_flip_rate_se
        ),
    )
    return report.model_copy(update={"noise": floor})
