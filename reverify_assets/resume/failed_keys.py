"""The failed keys of a failures sidecar: one row per failed attempt in, one summary per key out.

``<output stem>_failures.jsonl`` holds a row for every failed attempt, unsorted, so a key may appear several
times. Every reader wants the same per key: the class of its last attempt, how many attempts failed, whether
any said it was terminal (NeMo Gym's resume rules). The file is streamed; only the summaries are held.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from reverify_assets.files.jsonl import iter_jsonl
from reverify_assets.keys.rollout_keys import RolloutKey, row_key
from reverify_assets.rows.result_routing import FAILURE_CLASS_FIELD

TERMINAL_FIELD = "_ng_failure_terminal"
# The class of a failure without one of its own (missing, empty or not a string); the verify loop names a
# failure without a class so too.
UNKNOWN_CLASS = "unknown"

Noted = TypeVar("Noted")


@dataclass(slots=True)
class FailedKey(Generic[Noted]):
    failure_class: str  # of the key's last failed attempt
    attempts: int
    terminal: bool  # some attempt carried a truthy ``_ng_failure_terminal``
    noted: Noted  # what the reader's ``note`` took from the last attempt's row


def _nothing(_: dict[str, Any]) -> None:
    return None


def read_failed_keys(
    *sidecars: Path, note: Callable[[dict[str, Any]], Noted] = _nothing
) -> dict[RolloutKey, FailedKey[Noted]]:
    """Every key the sidecars name, in order of first appearance. Attempts add up across files and a later row
    wins (its class, its note). A sidecar that does not exist has no failures; a row without a valid key is an
    error naming the file and line."""
    failed: dict[RolloutKey, FailedKey[Noted]] = {}
    for path in sidecars:
        if not path.exists():
            continue
        for entry in iter_jsonl(path):
            row = entry.row
            key = row_key(row, path, entry.line_no)
            failure_class, terminal = _class_of(row), bool(row.get(TERMINAL_FIELD))
            known = failed.get(key)
            if known is None:
                failed[key] = FailedKey(failure_class, 1, terminal, note(row))
                continue
            known.failure_class = failure_class
            known.attempts += 1
            known.terminal = known.terminal or terminal
            known.noted = note(row)
    return failed


def _class_of(row: dict[str, Any]) -> str:
    failure_class = row.get(FAILURE_CLASS_FIELD)
    return failure_class if isinstance(failure_class, str) and failure_class else UNKNOWN_CLASS


def count_by_class(failed: Iterable[FailedKey[Any]]) -> Counter[str]:
    """Keys by their last class: each key once, however many attempts failed."""
    return Counter(key.failure_class for key in failed)
