"""One side of a comparison read once, line by line: its key index, its rewards checked, its configs counted.

Only the index (a few integers a row: with the fingerprints of each row's prompt and response, which tell
whether the two sides scored the same rollouts) and the config counts are kept; rows are read again, in key
order, by :mod:`paired_rows`.
"""

from __future__ import annotations

from array import array
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from reverify_assets.errors import InputError
from reverify_assets.files.jsonl import JsonlLine
from reverify_assets.keys.key_index import KeyIndex, scan_keys
from reverify_assets.keys.rollout_identity import response_fingerprint
from reverify_assets.keys.rollout_keys import RolloutKey
from reverify_assets.rows.result_routing import scoring_config

REWARD_FIELD = "reward"
RESPONSE_COLUMN = "response"  # each row's response_fingerprint


@dataclass(frozen=True)
class IndexedSide:
    path: Path
    keys: KeyIndex  # duplicate keys rejected
    configs: Counter[str]  # rows per verifier config hash (or "original")


def index_side(path: Path) -> IndexedSide:
    """Malformed JSON, a missing or non-integer key, a duplicate key, a missing or non-numeric reward: an
    error naming the file and line."""
    configs: Counter[str] = Counter()
    responses = array("q")

    def check(entry: JsonlLine, _: RolloutKey) -> None:
        read_reward(entry.row, path, entry.line_no)
        configs[scoring_config(entry.row)] += 1
        responses.append(response_fingerprint(entry.row))

    keys = scan_keys(path, check=check, with_prompts=True)
    frame = keys.frame.with_columns(pl.Series(RESPONSE_COLUMN, responses, dtype=pl.Int64))
    return IndexedSide(path, KeyIndex(path, frame), configs)


def read_reward(row: dict[str, Any], path: Path, line_no: int) -> float:
    reward = row.get(REWARD_FIELD)
    # bool is an int subclass, and `true` is not a reward.
    if not isinstance(reward, int | float) or isinstance(reward, bool):
        found = "it is missing or null" if reward is None else f"found {reward!r}"
        raise InputError(f"{path}:{line_no}: `{REWARD_FIELD}` must be a number ({found})", path=path, line=line_no)
    return float(reward)
