"""Both sides' rows, one key at a time, in key order, whatever order each file is in.

The two key indexes are joined (a few integers a key) and each row is read back with one seek, so only
the current pair of rows is in memory. A reverified output is already sorted, so its seeks run forward.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from reverify_assets.compare.side_index import RESPONSE_COLUMN
from reverify_assets.files.jsonl import read_row_at
from reverify_assets.keys.key_index import KEY_COLUMNS, PROMPT_COLUMN, KeyIndex, mismatched_prompts
from reverify_assets.keys.rollout_identity import ALLOW_FLAG, prompt_text, response_text
from reverify_assets.keys.rollout_keys import RolloutKey
from reverify_assets.keys.rollout_mismatch import SHOWN_MISMATCHES, PromptSide, prompt_mismatch_error

Row = dict[str, Any]


@dataclass(frozen=True, slots=True)
class KeyedPair:
    key: RolloutKey
    baseline: Row | None  # None: the key is only in the candidate
    candidate: Row | None


def join_keys(baseline: KeyIndex, candidate: KeyIndex) -> pl.DataFrame:
    """Every key of either side, sorted: task, rollout, then each side's offset, line and prompt fingerprint
    (null where the side lacks the key)."""

    def side(index: KeyIndex, name: str) -> pl.DataFrame:
        renamed = {"offset": "offset", "line": "line", PROMPT_COLUMN: "prompt", RESPONSE_COLUMN: "response"}
        return index.frame.rename({column: f"{name}_{part}" for column, part in renamed.items()}, strict=False)

    return (
        side(baseline, "baseline")
        .join(side(candidate, "candidate"), on=KEY_COLUMNS, how="full", coalesce=True)
        .sort(KEY_COLUMNS)
    )


def refuse_other_rollouts(joined: pl.DataFrame, baseline: Path, candidate: Path) -> None:
    """Two scorings of the same rollouts hold the same prompt and the same response under each key: a key whose
    two rows do not compares scorings of different rollouts, and is refused, naming the keys
    (``rollout_identity``)."""
    both = joined.drop_nulls(["baseline_line", "candidate_line"])
    sides = PromptSide("baseline", baseline, "baseline"), PromptSide("candidate", candidate, "candidate")
    for part, shown in (("prompt", prompt_text), ("response", response_text)):
        if f"baseline_{part}" not in both.columns or f"candidate_{part}" not in both.columns:
            continue
        mismatched = mismatched_prompts(
            both, f"baseline_{part}", f"candidate_{part}", whole=part == "response", either=True
        )
        if not mismatched.is_empty():
            raise prompt_mismatch_error(
                f"{mismatched.height} of the {both.height} keys in both {baseline} and {candidate} hold different "
                f"{part}s in the two: these are scorings of different rollouts, and comparing them would count "
                "every difference of the rollouts as the verifier's.",
                mismatched.sort("candidate_line").head(SHOWN_MISMATCHES).to_dicts(),
                *sides,
                shown=shown,
                advice=f"To compare them all the same (rollouts collected twice, an agent that rewrites its prompt), "
                f"pass {ALLOW_FLAG}.",
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
