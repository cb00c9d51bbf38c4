"""Groups of keys by the value of one row field (``agent_ref.name``, or any ``--by`` field), each with its
own counts and figures.

A key's group is its baseline row's value of the field, or its candidate row's when the baseline row
lacks the field (the two rows describe the same rollout; the original rollouts and a reverified output do
not carry the same fields). Per compared row only a small integer (the group's number) is kept.
"""

from __future__ import annotations

from array import array
from collections import Counter
from enum import StrEnum
from typing import Any

import numpy as np
import orjson
from pydantic import BaseModel, ConfigDict

from reverify_assets.compare.bootstrap import BootstrapSettings
from reverify_assets.compare.figures import PairedFigures, paired_figures
from reverify_assets.compare.paired_rows import KeyedPair

AGENT_FIELD = "agent_ref.name"
MISSING = "(missing)"
_ABSENT: Any = object()


class Uncompared(StrEnum):
    ONLY_BASELINE = "only_baseline"
    ONLY_CANDIDATE = "only_candidate"
    MASKED = "masked"


class GroupFigures(BaseModel):
    model_config = ConfigDict(frozen=True)

    value: str
    baseline_rows: int
    candidate_rows: int
    in_both: int
    only_baseline: int
    only_candidate: int
    masked: int  # in both, left out of the figures
    figures: PairedFigures  # of the compared rows (in both, not masked)


class Breakdown(BaseModel):
    model_config = ConfigDict(frozen=True)

    field: str
    groups: list[GroupFigures]


def field_value(row: dict[str, Any], path: tuple[str, ...]) -> Any:
    """The value at a dotted path into nested objects; ``_ABSENT`` where any step is missing."""
    value: Any = row
    for name in path:
        if not isinstance(value, dict) or name not in value:
            return _ABSENT
        value = value[name]
    return value


def value_label(value: Any) -> str:
    if value is _ABSENT:
        return MISSING
    return value if isinstance(value, str) else orjson.dumps(value).decode()


class FieldGrouping:
    """Numbers each key's group as the pairs stream past, and counts what is not compared."""

    def __init__(self, field: str) -> None:
        self.field = field
        self._path = tuple(field.split("."))
        self._codes: dict[str, int] = {}
        self._compared: array[int] = array("i")  # a compared row's group, in the order rows were compared
        self._uncompared: dict[Uncompared, Counter[int]] = {kind: Counter() for kind in Uncompared}

    def group_of(self, pair: KeyedPair) -> int:
        value = _ABSENT if pair.baseline is None else field_value(pair.baseline, self._path)
        if value is _ABSENT and pair.candidate is not None:
            value = field_value(pair.candidate, self._path)
        return self._codes.setdefault(value_label(value), len(self._codes))

    def add_compared(self, code: int) -> None:
        self._compared.append(code)

    def add_uncompared(self, code: int, kind: Uncompared) -> None:
        self._uncompared[kind][code] += 1

    def labels(self) -> list[str]:
        """The groups' values, in the order the breakdown lists them."""
        return sorted(self._codes)

    def breakdown(
        self, baseline: np.ndarray, candidate: np.ndarray, tasks: np.ndarray, bootstrap: BootstrapSettings
    ) -> Breakdown:
        """The groups' figures; the arrays hold the compared rows, in the order they were compared."""
        codes = np.frombuffer(self._compared, dtype=np.int32)
        # Rows sorted by group (stably: each group's rows stay in key order), so each group is one slice even
        # when a field has as many values as rows.
        by_group = np.argsort(codes, kind="stable")
        sorted_codes = codes[by_group]
        groups = []
        for label in self.labels():
            code = self._codes[label]
            mine = by_group[np.searchsorted(sorted_codes, code) : np.searchsorted(sorted_codes, code, side="right")]
            only_baseline = self._uncompared[Uncompared.ONLY_BASELINE][code]
            only_candidate = self._uncompared[Uncompared.ONLY_CANDIDATE][code]
            masked = self._uncompared[Uncompared.MASKED][code]
            in_both = mine.size + masked
            groups.append(
                GroupFigures(
                    value=label,
                    baseline_rows=in_both + only_baseline,
                    candidate_rows=in_both + only_candidate,
                    in_both=in_both,
                    only_baseline=only_baseline,
                    only_candidate=only_candidate,
                    masked=masked,
                    figures=paired_figures(baseline[mine], candidate[mine], tasks[mine], bootstrap),
                )
            )
        return Breakdown(field=self.field, groups=groups)
