"""Judge-failure recovery: which sidecar rows to grade again, and which successes to carry over.

The rows to recover are the source sidecar's ``judge_failed`` / ``judge_invalid`` rows, one per
key (a key failed on several attempts holds the same stored response each time). Successes are
carried into the output verbatim, byte for byte, so recovery never alters a score it did not make.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from pathlib import Path

import polars as pl

from reverify_assets.files.jsonl import iter_jsonl, read_line_at
from reverify_assets.keys.key_index import INDEX_SCHEMA, KEY_COLUMNS, KeyIndex
from reverify_assets.keys.rollout_keys import row_key
from reverify_assets.rows.result_routing import FAILURE_CLASS_FIELD

RECOVERABLE_CLASSES = frozenset({"judge_failed", "judge_invalid"})


def index_judge_failures(sidecar: Path, *, limit: int | None = None) -> KeyIndex:
    """Key index of the first recoverable row of each key, in file order (``--limit`` counts these)."""
    tasks, rollouts, offsets, lines = array("q"), array("q"), array("q"), array("q")
    seen: set[tuple[int, int]] = set()
    for entry in iter_jsonl(sidecar):
        if entry.row.get(FAILURE_CLASS_FIELD) not in RECOVERABLE_CLASSES:
            continue
        key = row_key(entry.row, sidecar, entry.line_no)
        if key in seen:
            continue
        if limit is not None and len(seen) >= limit:
            break
        seen.add(key)
        tasks.append(key[0])
        rollouts.append(key[1])
        offsets.append(entry.offset)
        lines.append(entry.line_no)
    frame = pl.DataFrame({"task": tasks, "rollout": rollouts, "offset": offsets, "line": lines}, schema=INDEX_SCHEMA)
    return KeyIndex(sidecar, frame)


def successes_to_seed(successes: KeyIndex, already_in_output: pl.DataFrame) -> pl.DataFrame:
    """Rows of the successes file whose key the output lacks, in file order."""
    return successes.frame.join(already_in_output.select(KEY_COLUMNS), on=KEY_COLUMNS, how="anti").sort("line")


def iter_seed_lines(path: Path, seeds: pl.DataFrame) -> Iterator[bytes]:
    """The chosen lines of ``path``, exactly as stored, newline-terminated."""
    with open(path, "rb") as fh:
        for offset in seeds["offset"]:
            yield read_line_at(fh, offset)
