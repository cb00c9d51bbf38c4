"""Both sides' rows, one key at a time, in key order, whatever order each file is in.

The two key indexes are joined (a few integers a key) and each row is read back with one seek, so only
the current pair of rows is in memory. A reverified output is already sorted, so its seeks run forward.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import polars as pl

from reverify_assets.lib.jsonl import read_row_at
from reverify_assets.lib.key_index import KEY_COLUMNS, KeyIndex
from reverify_assets.lib.keys import RolloutKey

Row = dict[str, Any]


@dataclass(frozen=True, slots=True)
class KeyedPair:
    key: RolloutKey
    baseline: Row | None  # None: the key is only in the candidate
    candidate: Row | None


def join_keys(baseline: KeyIndex, candidate: KeyIndex) -> pl.DataFrame:
    """Every key of either side, sorted: task, rollout, then each side's offset and line (null where the
    side lacks the key)."""

    def side(index: KeyIndex, name: str) -> pl.DataFrame:
        return index.frame.rename({"offset": f"{name}_offset", "line": f"{name}_line"})

    return (
        side(baseline, "baseline")
        .join(side(candidate, "candidate"), on=KEY_COLUMNS, how="full", coalesce=True)
        .sort(KEY_COLUMNS)
    )


def paired_rows(joined: pl.DataFrame, baseline: KeyIndex, candidate: KeyIndex) -> Iterator[KeyedPair]:
    """The rows of ``join_keys(baseline, candidate)``, read back."""
    with open(baseline.path, "rb") as left, open(candidate.path, "rb") as right:
        columns = ("task", "rollout", "baseline_offset", "baseline_line", "candidate_offset", "candidate_line")
        for task, rollout, b_offset, b_line, c_offset, c_line in joined.select(columns).iter_rows():
            yield KeyedPair(
                (task, rollout),
                None if b_offset is None else read_row_at(left, b_offset, baseline.path, b_line),
                None if c_offset is None else read_row_at(right, c_offset, candidate.path, c_line),
            )
