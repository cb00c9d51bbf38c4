"""Rows whose prompts differ: read again before they are called a mismatch, and shown so that a user can act.

The fingerprints (``rollout_identity``) say which pairs differ; here the two rows of a pair are read again and
walked (``confirmed_mismatches``), and the error names both files, the first keys with their lines, and a short
diff of the first pair's prompts (or responses: ``reverify compare``). ``reverify run`` compares its files' first
rows before it starts any server (``first_rows_disagree``): a whole file of another dataset is refused without a
server started; a mismatch further in is found by the join at the end of the start-up, before any row is sent and
before anything is written.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from reverify_assets.errors import InputError
from reverify_assets.keys.rollout_identity import (
    ALLOW_FLAG,
    ALLOW_KEY,
    NO_TEXT,
    USER_BITS,
    USER_SHIFT,
    prompt_fingerprint,
    prompt_text,
    response_text,
)
from reverify_assets.keys.rollout_keys import describe_key

SHOWN_MISMATCHES = 3
DIFF_LINES = 12
DIFF_WIDTH = 160


@dataclass(frozen=True)
class PromptSide:
    """One file of a comparison of prompts: ``column`` prefixes its ``_offset`` and ``_line`` in the pairs."""

    name: str
    path: Path
    column: str


def prompt_mismatch_error(
    headline: str,
    first: list[dict[str, Any]],
    left: PromptSide,
    right: PromptSide,
    *,
    shown: Callable[[Mapping[str, Any]], str] = prompt_text,
    advice: str = f"If the agent rewrites its prompt on purpose, pass {ALLOW_FLAG} (++{ALLOW_KEY}=true).",
) -> InputError:
    """``headline``, then the first pairs that differ (in ``right``'s order: ``task``, ``rollout`` and each side's
    offset and line), the first pair's texts (``shown``: its prompt), ``left`` (-) against ``right`` (+), and
    ``advice``: how to let them through."""
    keys = ", ".join(
        f"{describe_key((pair['task'], pair['rollout']))} ({right.name} line {pair[f'{right.column}_line']}, "
        f"{left.name} line {pair[f'{left.column}_line']})"
        for pair in first[:SHOWN_MISMATCHES]
    )
    pair = first[0]
    diff = _diff(
        shown(_row_at(left.path, pair[f"{left.column}_offset"])),
        shown(_row_at(right.path, pair[f"{right.column}_offset"])),
    )
    what = "response" if shown is response_text else "prompt"
    return InputError(
        f"{headline} First: {keys}. The first's {what}, {left.name} (-) against {right.name} (+):\n{diff}\n{advice}",
        path=right.path,
        line=pair[f"{right.column}_line"],
        key=describe_key((pair["task"], pair["rollout"])),
    )


def confirmed_mismatches(pairs: list[dict[str, Any]], left: PromptSide, right: PromptSide) -> list[dict[str, Any]]:
    """Those of ``pairs`` whose prompts still differ when both rows are read again and walked: the scans' short way
    (``PromptShape``) may hash other messages than the walk for a row of another shape."""
    with left.path.open("rb") as left_file, right.path.open("rb") as right_file:
        return [
            pair
            for pair in pairs
            if _disagree(
                prompt_fingerprint(_read_at(left_file, pair[f"{left.column}_offset"])),
                prompt_fingerprint(_read_at(right_file, pair[f"{right.column}_offset"])),
            )
        ]


def _read_at(fh: BinaryIO, offset: int) -> dict[str, Any]:
    fh.seek(offset)
    row = orjson.loads(fh.readline())
    return row if isinstance(row, dict) else {}


def _row_at(path: Path, offset: int) -> dict[str, Any]:
    with path.open("rb") as fh:
        return _read_at(fh, offset)


def _diff(left: str, right: str) -> str:
    before, after = left.splitlines() or [""], right.splitlines() or [""]
    lines = [
        line if len(line) <= DIFF_WIDTH else line[: DIFF_WIDTH - 1] + "…"
        for line in difflib.unified_diff(before, after, lineterm="", n=1)
    ][2:]  # without the ---/+++ header
    more = len(lines) - DIFF_LINES
    return "\n".join(f"  {line}" for line in lines[:DIFF_LINES]) + (f"\n  ... ({more} more lines)" if more > 0 else "")


SAMPLED_ROLLOUTS = 16
# Where those rollouts' input rows are looked for: enough for NeMo Gym's files (inputs in key order, rollouts in
# completion order, the first of the first tasks), little enough to keep off the start-up's time, which waits.
SAMPLED_INPUT_ROWS, SAMPLED_INPUT_BYTES = 2000, 4 << 20


def first_rows_disagree(inputs: Path, rollouts: Path, limit: int | None = None) -> bool:
    """Whether one of the first rollouts (of the first ``limit``) has a prompt that is not its input row's, as the
    join would find, looked for among the first megabytes of the inputs (NeMo Gym writes them in key order, and
    the first rollouts are of the first tasks). A few milliseconds; any file it cannot read quickly answers False,
    and the start-up's scans then say what is wrong with it."""
    try:
        wanted = _first_prompts(rollouts, SAMPLED_ROLLOUTS if limit is None else min(limit, SAMPLED_ROLLOUTS))
        return any(_disagree(expected, wanted.pop(key)) for key, expected in _input_prompts(inputs, set(wanted)))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False


def _first_prompts(rollouts: Path, rows: int) -> dict[tuple[Any, Any], int]:
    wanted: dict[tuple[Any, Any], int] = {}
    with rollouts.open("rb") as fh:
        for line, _ in zip(fh, range(rows), strict=False):
            row = orjson.loads(line)
            wanted[(row["_ng_task_index"], row["_ng_rollout_index"])] = prompt_fingerprint(row)
    return wanted


def _input_prompts(inputs: Path, keys: set[tuple[Any, Any]]) -> Iterator[tuple[tuple[Any, Any], int]]:
    read = 0
    with inputs.open("rb") as fh:
        for line, _ in zip(fh, range(SAMPLED_INPUT_ROWS), strict=False):
            read += len(line)
            if not keys or read > SAMPLED_INPUT_BYTES:
                return
            row = orjson.loads(line)
            key = (row["_ng_task_index"], row["_ng_rollout_index"])
            if key in keys:
                keys.discard(key)
                yield key, prompt_fingerprint(row)


def _disagree(expected: int, found: int) -> bool:
    """``key_index.mismatched_prompts``'s rule for one pair (an input row's prompt, its rollout's)."""
    if NO_TEXT in (expected, found):
        return False
    if expected & USER_BITS == 0:
        return expected >> USER_SHIFT != found >> USER_SHIFT
    return expected != found
