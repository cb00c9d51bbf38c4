"""Shards of results read back as one stream sorted by key, and written as one merged file."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from reverify_assets.errors import ReverifyError
from reverify_assets.lib.jsonl import AtomicWriter, JsonlLine, parse_row, read_line_at
from reverify_assets.lib.key_index import KEY_COLUMNS, scan_keys
from reverify_assets.lib.keys import RolloutKey, describe_key
from reverify_assets.lib.sorted_keys import duplicated_keys


def index_shards(shards: Sequence[Path], on_row: Callable[[int, dict[str, Any]], None] | None = None) -> pl.DataFrame:
    """Columns task, rollout, shard (position in ``shards``), offset, line; sorted by key.

    ``on_row(shard position, row)`` sees every row as the shards are indexed (no second reading)."""
    frames = [
        scan_keys(path, check=_row_check(position, on_row)).frame.with_columns(
            pl.lit(position, dtype=pl.Int32).alias("shard")
        )
        for position, path in enumerate(shards)
    ]
    merged = pl.concat(frames).sort([*KEY_COLUMNS, "shard"])
    duplicates = duplicated_keys(merged)
    if not duplicates.is_empty():
        key = duplicates.row(0)
        first = merged.filter((pl.col("task") == key[0]) & (pl.col("rollout") == key[1])).head(2).rows(named=True)
        raise ReverifyError(
            f"key {describe_key(key)} is in two shards: {shards[first[0]['shard']]}:{first[0]['line']} and "
            f"{shards[first[1]['shard']]}:{first[1]['line']}"
        )
    return merged


def _row_check(
    position: int, on_row: Callable[[int, dict[str, Any]], None] | None
) -> Callable[[JsonlLine, RolloutKey], None] | None:
    if on_row is None:
        return None
    return lambda entry, _key: on_row(position, entry.row)


def iter_raw_lines(index: pl.DataFrame, shards: Sequence[Path]) -> Iterator[tuple[bytes, Path, int]]:
    """(line with its newline, shard path, line number) in the index's order."""
    handles = [open(path, "rb") for path in shards]
    try:
        for shard, offset, line in index.select("shard", "offset", "line").iter_rows():
            yield read_line_at(handles[shard], offset), shards[shard], line
    finally:
        for handle in handles:
            handle.close()


def iter_rows(index: pl.DataFrame, shards: Sequence[Path]) -> Iterator[dict[str, Any]]:
    for raw, path, line in iter_raw_lines(index, shards):
        yield parse_row(raw.rstrip(b"\r\n"), path, line)


def write_merged(index: pl.DataFrame, shards: Sequence[Path], output: Path) -> None:
    """Rows are copied verbatim, byte for byte: merging never re-serialises a result."""
    with AtomicWriter(output) as fh:
        for raw, _, _ in iter_raw_lines(index, shards):
            fh.write(raw)
