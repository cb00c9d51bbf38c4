"""Shards read back as one key-ordered stream; a key in two shards is refused, naming both places."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from reverify_assets.errors import ReverifyError
from reverify_assets.pipeline.shard_merge import index_shards, iter_rows, write_merged


def shard(path: Path, keys: list[tuple[int, int]]) -> Path:
    path.write_bytes(
        b"".join(orjson.dumps({"_ng_task_index": t, "_ng_rollout_index": r, "reward": t + r}) + b"\n" for t, r in keys)
    )
    return path


def test_shards_merge_in_key_order(tmp_path: Path) -> None:
    shards = [shard(tmp_path / "a.jsonl", [(2, 0), (0, 1)]), shard(tmp_path / "b.jsonl", [(1, 0), (0, 0)])]
    index = index_shards(shards)
    assert index.select("task", "rollout", "shard", "line").rows() == [
        (0, 0, 1, 2),
        (0, 1, 0, 2),
        (1, 0, 1, 1),
        (2, 0, 0, 1),
    ]
    assert [(row["_ng_task_index"], row["_ng_rollout_index"]) for row in iter_rows(index, shards)] == [
        (0, 0),
        (0, 1),
        (1, 0),
        (2, 0),
    ]
    write_merged(index, shards, tmp_path / "merged.jsonl")
    assert [orjson.loads(line)["reward"] for line in (tmp_path / "merged.jsonl").read_bytes().splitlines()] == [
        0,
        1,
        1,
        2,
    ]


def test_a_key_in_two_shards_names_both(tmp_path: Path) -> None:
    shards = [
        shard(tmp_path / "a.jsonl", [(5, 5), (3, 1)]),
        shard(tmp_path / "b.jsonl", [(0, 0), (5, 5)]),
        shard(tmp_path / "c.jsonl", [(3, 1)]),
    ]
    with pytest.raises(ReverifyError, match=r"key \(task 3, rollout 1\) is in two shards: .*a.jsonl:2 and .*c.jsonl:1"):
        index_shards(shards)
