"""Key indexes of source files, computed once per file version and shared by every shard.

A shard needs the keys and byte offsets of its tasks only, but finding them means reading the whole
file; caching the index (keyed by path, size and modification time) makes that a one-off per file.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import orjson
import polars as pl

from reverify_assets.files.atomic import write_bytes_atomic, write_parquet_atomic
from reverify_assets.keys.key_index import KeyIndex
from reverify_assets.run.preparation import InputsIndex, index_inputs, index_rollouts, inputs_index_frame

# Folded into every entry's name: an index of an older layout is never read, but made anew. 2: with each row's
# prompt fingerprint, which the shard's join compares (keys.rollout_identity).
INDEX_LAYOUT = 2


@dataclass(frozen=True)
class IndexCache:
    folder: Path

    def _stem(self, path: Path, kind: str) -> Path:
        stat = path.stat()
        # ctime and inode too: `cp -p`, rsync -a and tar restore mtime, but nothing can set ctime.
        fingerprint = (
            f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}|{stat.st_ctime_ns}|{stat.st_ino}|{kind}|"
            f"{INDEX_LAYOUT}".encode()
        )
        return self.folder / hashlib.sha256(fingerprint).hexdigest()[:24]

    def inputs(self, path: Path) -> InputsIndex:
        stem = self._stem(path, "inputs")
        frame_path, routes_path = stem.with_suffix(".parquet"), stem.with_suffix(".routes.json")
        if frame_path.exists() and routes_path.exists():
            frame = pl.read_parquet(frame_path)
            routes = orjson.loads(routes_path.read_bytes())
            return InputsIndex(KeyIndex(path, frame.drop("route")), frame["route"], routes)
        index = index_inputs(path, reject_duplicates=False)  # reported per shard by an asset check
        self.folder.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(routes_path, orjson.dumps(index.routes))
        write_parquet_atomic(inputs_index_frame(index), frame_path)
        return index

    def rollouts(self, path: Path) -> KeyIndex:
        frame_path = self._stem(path, "rollouts").with_suffix(".parquet")
        if frame_path.exists():
            return KeyIndex(path, pl.read_parquet(frame_path))
        index = index_rollouts(path, reject_duplicates=False)
        self.folder.mkdir(parents=True, exist_ok=True)
        write_parquet_atomic(index.frame, frame_path)
        return index
