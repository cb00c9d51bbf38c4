"""Which keys each side has, which only one has, and which a side's verifier failed on (its sidecar).

A comparison covers only the keys both outputs hold; every other key is counted here, so none is left
out silently. Failures are read from ``<stem>_failures.jsonl`` next to each file, one row per attempt:
a key counts once, under its last attempt's ``_ng_failure_class``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl
from pydantic import BaseModel, ConfigDict

from reverify_assets.files.names import sidecar_path
from reverify_assets.keys.key_index import KEY_COLUMNS
from reverify_assets.resume.failed_keys import read_failed_keys

FAILURES_SCHEMA = {"task": pl.Int64, "rollout": pl.Int64, "failure_class": pl.String}


class SideCoverage(BaseModel):
    model_config = ConfigDict(frozen=True)

    rows: int
    only_here: int  # keys the other side lacks
    sidecar: str | None  # None: there is no sidecar next to the file
    failed_keys: int  # distinct keys in the sidecar
    failed_by_class: dict[str, int]
    failed_not_in_output: int  # failed keys this side's output lacks (not recovered by a later attempt)


class Coverage(BaseModel):
    model_config = ConfigDict(frozen=True)

    baseline: SideCoverage
    candidate: SideCoverage
    in_both: int
    compared: int  # in both, neither masked: the rows every figure is computed from
    masked: int  # in both, ``mask_sample`` on either side: the reward is not a measurement
    only_baseline_failed_in_candidate: int
    only_candidate_failed_in_baseline: int
    failed_in_either: int  # distinct keys in either sidecar
    failed_in_neither_output: int


@dataclass(frozen=True)
class Failures:
    sidecar: Path | None  # None: there is no sidecar
    keys: pl.DataFrame  # task, rollout, failure_class; one row a key


def read_failures(output: Path) -> Failures:
    """The failed keys of the sidecar next to ``output``, each with its last attempt's class."""
    sidecar = sidecar_path(output)
    if not sidecar.exists():
        return Failures(None, pl.DataFrame(schema=FAILURES_SCHEMA))
    failed = read_failed_keys(sidecar)
    columns = {
        "task": [key[0] for key in failed],
        "rollout": [key[1] for key in failed],
        "failure_class": [failure.failure_class for failure in failed.values()],
    }
    return Failures(sidecar, pl.DataFrame(columns, schema=FAILURES_SCHEMA))


def count_coverage(
    joined: pl.DataFrame,
    failures: tuple[Failures, Failures],
    masked: int,
) -> Coverage:
    """``joined`` as :func:`paired_rows.join_keys` makes it; ``failures`` as :func:`read_failures` reads them."""
    has_baseline, has_candidate = pl.col("baseline_offset").is_not_null(), pl.col("candidate_offset").is_not_null()
    keys = {
        "baseline": joined.filter(has_baseline).select(KEY_COLUMNS),
        "candidate": joined.filter(has_candidate).select(KEY_COLUMNS),
    }
    only = {
        "baseline": joined.filter(has_baseline & ~has_candidate).select(KEY_COLUMNS),
        "candidate": joined.filter(has_candidate & ~has_baseline).select(KEY_COLUMNS),
    }
    failed_baseline, failed_candidate = failures[0].keys, failures[1].keys
    failed_either = pl.concat([failed_baseline.select(KEY_COLUMNS), failed_candidate.select(KEY_COLUMNS)]).unique()
    in_both = joined.height - only["baseline"].height - only["candidate"].height

    def side(role: str, own: Failures) -> SideCoverage:
        failed, sidecar = own.keys, own.sidecar
        by_class = failed.group_by("failure_class").len().sort(["len", "failure_class"], descending=[True, False])
        return SideCoverage(
            rows=keys[role].height,
            only_here=only[role].height,
            sidecar=None if sidecar is None else str(sidecar),
            failed_keys=failed.height,
            failed_by_class=dict(by_class.iter_rows()),
            failed_not_in_output=failed.join(keys[role], on=KEY_COLUMNS, how="anti").height,
        )

    return Coverage(
        baseline=side("baseline", failures[0]),
        candidate=side("candidate", failures[1]),
        in_both=in_both,
        compared=in_both - masked,
        masked=masked,
        only_baseline_failed_in_candidate=only["baseline"].join(failed_candidate, on=KEY_COLUMNS, how="semi").height,
        only_candidate_failed_in_baseline=only["candidate"].join(failed_baseline, on=KEY_COLUMNS, how="semi").height,
        failed_in_either=failed_either.height,
        failed_in_neither_output=failed_either.join(joined.select(KEY_COLUMNS), on=KEY_COLUMNS, how="anti").height,
    )
