"""Shards of results read back as one stream sorted by key, and written as one merged file."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from reverify_assets.errors import InputError
from reverify_assets.files.jsonl import READ_BUFFER_BYTES, AtomicWriter, parse_row, read_line_at
from reverify_assets.keys.key_columns import scan_key_columns
from reverify_assets.keys.key_index import KEY_COLUMNS, KeyIndex, key_index_of, scan_keys
from reverify_assets.keys.rollout_keys import RolloutKey, check_indexed_key, describe_key
from reverify_assets.keys.sorted_keys import duplicated_keys


class CountsByShard:
    """A value of every row, counted per shard as the shards are indexed: ``value_of`` reads only the row's
    top-level fields ``names`` (the fast scan hands it those alone)."""

    def __init__(self, names: tuple[str, ...], value_of: Callable[[Mapping[str, Any]], str]) -> None:
        self.names = names
        self._value_of = value_of
        self.by_shard: list[Counter[str]] = []

    def start_shard(self) -> None:
        self.by_shard.append(Counter())

    def restart_shard(self) -> None:
        """Forget what the shard counted so far: the exact scan counts its rows again."""
        self.by_shard[-1].clear()

    def see(self, fields: dict[str, Any]) -> None:
        self.by_shard[-1][self._value_of(fields)] += 1


def index_shards(shards: Sequence[Path], counts: CountsByShard | None = None) -> pl.DataFrame:
    """Columns task, rollout, shard (position in ``shards``), offset, line; sorted by key.

    ``counts`` counts every row's value as the shards are indexed (no second reading)."""
    frames = [
        _shard_index(path, counts).frame.with_columns(pl.lit(position, dtype=pl.Int32).alias("shard"))
        for position, path in enumerate(shards)
    ]
    merged = pl.concat(frames).sort([*KEY_COLUMNS, "shard"])
    duplicates = duplicated_keys(merged)
    if not duplicates.is_empty():
        key = duplicates.row(0)
        first = merged.filter((pl.col("task") == key[0]) & (pl.col("rollout") == key[1])).head(2).rows(named=True)
        raise InputError(
            f"key {describe_key(key)} is in two shards: {shards[first[0]['shard']]}:{first[0]['line']} and "
            f"{shards[first[1]['shard']]}:{first[1]['line']}",
            path=shards[first[0]["shard"]],
            line=first[0]["line"],
            key=describe_key(key),
        )
    return merged


def _shard_index(path: Path, counts: CountsByShard | None) -> KeyIndex:
    """The shard's keys by the fast scan, else (a line only the exact scan can judge) by the exact one."""
    if counts is not None:
        counts.start_shard()
    columns = scan_key_columns(path, fields=counts)
    if columns is not None:
        return key_index_of(path, columns)
    if counts is None:
        return scan_keys(path)
    counts.restart_shard()
    return scan_keys(path, check=lambda entry, _key: counts.see(entry.row))


def iter_raw_lines(index: pl.DataFrame, shards: Sequence[Path]) -> Iterator[tuple[bytes, Path, int, RolloutKey]]:
    """(line with its newline, shard path, line number, key) in the index's order."""
    # A shard read forward (its rows in key order, as a run writes them) is read a buffer of many rows at a time,
    # as iter_jsonl reads; one read out of order (an --append target, say) a few kilobytes at a time.
    forward = _read_forward(index)
    handles = [
        open(path, "rb", buffering=READ_BUFFER_BYTES if forward.get(position, True) else -1)
        for position, path in enumerate(shards)
    ]
    try:
        for task, rollout, shard, offset, line in index.select(*KEY_COLUMNS, "shard", "offset", "line").iter_rows():
            yield read_line_at(handles[shard], offset), shards[shard], line, (task, rollout)
    finally:
        for handle in handles:
            handle.close()


def _read_forward(index: pl.DataFrame) -> dict[int, bool]:
    """Whether each shard's lines come in file order when read in the index's (key) order."""
    forward = index.group_by("shard").agg((pl.col("offset").diff().fill_null(0) >= 0).all().alias("forward"))
    return dict(forward.iter_rows())


def iter_rows(index: pl.DataFrame, shards: Sequence[Path]) -> Generator[dict[str, Any], None, None]:
    for raw, path, line, key in iter_raw_lines(index, shards):
        yield _parsed(raw, path, line, key)


def merged_rows(index: pl.DataFrame, shards: Sequence[Path], output: Path) -> Iterator[dict[str, Any]]:
    """``iter_rows`` while each row is copied to ``output`` verbatim, byte for byte (merging never re-serialises a
    result): one reading of the shards serves both. The merged file is moved into place once the last row is
    read; a reader that stops short leaves none."""
    with AtomicWriter(output) as fh:
        for raw, path, line, key in iter_raw_lines(index, shards):
            fh.write(raw)
            yield _parsed(raw, path, line, key)


def _parsed(raw: bytes, path: Path, line: int, key: RolloutKey) -> dict[str, Any]:
    row = parse_row(raw, path, line)
    check_indexed_key(row, path, line, key)
    return row
