"""Putting a finished output in key order: rewritten under a temporary name, moved into place at once."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from reverify_assets.files.jsonl import AtomicWriter, read_line_at
from reverify_assets.keys.key_columns import scan_key_columns
from reverify_assets.keys.key_index import KEY_COLUMNS, key_index_of, scan_keys

COPY_BATCH = 1024


def sort_by_key(path: Path) -> bool:
    """Sort the file's lines by (task, rollout) unless they already are; True when it was rewritten.

    Lines are copied byte for byte. A crash mid-way leaves the unsorted original, whole.
    """
    if not path.exists() or path.stat().st_size == 0:
        return False
    # simdjson's scan first: it finds the keys without building the rows (half the time at 100,000 rows).
    columns = scan_key_columns(path)
    index = (scan_keys(path) if columns is None else key_index_of(path, columns)).frame
    if index.select(pl.struct(KEY_COLUMNS).is_sorted()).item():
        return False
    ordered = index.sort(KEY_COLUMNS)["offset"]
    with open(path, "rb") as source, AtomicWriter(path) as target:
        batch = []
        for offset in ordered:
            batch.append(read_line_at(source, offset))
            if len(batch) >= COPY_BATCH:
                target.write(b"".join(batch))
                batch.clear()
        target.write(b"".join(batch))
    return True
