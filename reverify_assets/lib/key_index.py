"""Key-only indexes of JSONL files and the join of rollouts to their materialized inputs.

An index holds four integers per row (key, byte offset, line number), never the row itself, so
joining and sorting a million rows costs tens of megabytes; rows are read back one seek at a time.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from reverify_assets.errors import ReverifyError
from reverify_assets.lib.jsonl import JsonlLine, iter_jsonl
from reverify_assets.lib.keys import RolloutKey, describe_key, row_key

INDEX_SCHEMA = {"task": pl.Int64, "rollout": pl.Int64, "offset": pl.Int64, "line": pl.Int64}
KEY_COLUMNS = ["task", "rollout"]


@dataclass(frozen=True)
class KeyIndex:
    path: Path
    frame: pl.DataFrame  # task, rollout, offset, line; in file order

    @property
    def rows(self) -> int:
        return self.frame.height


RowCheck = Callable[[JsonlLine, RolloutKey], None]


def scan_keys(
    path: Path, *, check: RowCheck | None = None, limit: int | None = None, reject_duplicates: bool = True
) -> KeyIndex:
    """Index a JSONL file by key; ``check`` sees each parsed row (to validate it) before it is dropped.

    ``reject_duplicates=False`` keeps every copy, for callers that report duplicates instead of failing.
    """
    tasks, rollouts, offsets, lines = array("q"), array("q"), array("q"), array("q")
    for entry in iter_jsonl(path):
        if limit is not None and len(tasks) >= limit:
            break
        key = row_key(entry.row, path, entry.line_no)
        if check is not None:
            check(entry, key)
        tasks.append(key[0])
        rollouts.append(key[1])
        offsets.append(entry.offset)
        lines.append(entry.line_no)
    frame = pl.DataFrame({"task": tasks, "rollout": rollouts, "offset": offsets, "line": lines}, schema=INDEX_SCHEMA)
    index = KeyIndex(path, frame)
    if reject_duplicates:
        reject_duplicate_keys(index)
    return index


def duplicated_keys(frame: pl.DataFrame) -> pl.DataFrame:
    """The keys (task, rollout) that appear more than once."""
    return frame.filter(pl.struct(KEY_COLUMNS).is_duplicated()).select(KEY_COLUMNS).unique().sort(KEY_COLUMNS)


def reject_duplicate_keys(index: KeyIndex) -> None:
    duplicated = index.frame.filter(pl.struct(KEY_COLUMNS).is_duplicated())
    if duplicated.is_empty():
        return
    first = duplicated.sort("line").row(0, named=True)
    key = (first["task"], first["rollout"])
    at_lines = duplicated.filter((pl.col("task") == key[0]) & (pl.col("rollout") == key[1]))["line"]
    others = duplicated.select(KEY_COLUMNS).unique().height - 1
    more = f" ({others} more duplicated keys)" if others else ""
    raise ReverifyError(
        f"{index.path}: duplicate key {describe_key(key)} at lines {', '.join(str(n) for n in sorted(at_lines))}{more}"
    )


def join_rollouts_to_inputs(inputs: KeyIndex, rollouts: KeyIndex) -> pl.DataFrame:
    """Pair every rollout with its input row, sorted by key.

    Columns: task, rollout, input_offset, input_line, rollout_offset, rollout_line, then any further
    columns the inputs index carries.
    """
    missing = rollouts.frame.join(inputs.frame, on=KEY_COLUMNS, how="anti")
    if not missing.is_empty():
        first = missing.sort("line").row(0, named=True)
        others = missing.height - 1
        more = f" ({others} more rollouts have no input row)" if others else ""
        raise ReverifyError(
            f"{rollouts.path}:{first['line']}: rollout {describe_key((first['task'], first['rollout']))} "
            f"has no matching row in the materialized inputs {inputs.path}{more}"
        )
    extra_columns = [name for name in inputs.frame.columns if name not in INDEX_SCHEMA]
    return (
        rollouts.frame.rename({"offset": "rollout_offset", "line": "rollout_line"})
        .join(
            inputs.frame.rename({"offset": "input_offset", "line": "input_line"}),
            on=KEY_COLUMNS,
            how="inner",
        )
        .select("task", "rollout", "input_offset", "input_line", "rollout_offset", "rollout_line", *extra_columns)
        .sort(KEY_COLUMNS)
    )
