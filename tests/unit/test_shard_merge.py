"""Shards read back as one key-ordered stream; a key in two shards is refused, naming both places."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from reverify_assets.errors import ReverifyError
from reverify_assets.lib.result_routing import PROVENANCE_FIELD, scoring_config
from reverify_assets.pipeline.shard_merge import CountsByShard, index_shards, iter_rows, merged_rows, write_merged


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


def stamped(task: int, config: str | None, *, big: bool = False) -> bytes:
    row: dict[str, object] = {"_ng_task_index": task, "_ng_rollout_index": 0}
    if config is not None:
        row[PROVENANCE_FIELD] = {"config_hash": config, "server": "mcqa"}
    # A field beyond 64 bits, which orjson reads and simdjson does not: the fast scan gives way to the exact one.
    return orjson.dumps(row)[:-1] + (b',"size":18446744073709551616}' if big else b"}") + b"\n"


@pytest.mark.parametrize("big_at", [None, 0, 2])
def test_rows_are_counted_once_per_shard_whichever_scan_reads_it(tmp_path: Path, big_at: int | None) -> None:
    second = [stamped(task, config) for task, config in [(10, "b"), (11, None), (12, "b")]]
    if big_at is not None:
        second[big_at] = stamped(10 + big_at, "b", big=True)
    (tmp_path / "b.jsonl").write_bytes(b"".join(second))
    (tmp_path / "a.jsonl").write_bytes(stamped(0, "a") + stamped(1, "a") + stamped(2, None))
    shards = [tmp_path / "a.jsonl", tmp_path / "b.jsonl"]
    counts = CountsByShard((PROVENANCE_FIELD,), scoring_config)
    index = index_shards(shards, counts)
    assert index.height == 6
    assert counts.by_shard == [{"a": 2, "original": 1}, {"b": 2, "original": 1}]


def test_merged_rows_are_the_merged_file_parsed_and_a_reader_that_stops_short_leaves_no_file(tmp_path: Path) -> None:
    shards = [shard(tmp_path / "a.jsonl", [(2, 0), (0, 1)]), shard(tmp_path / "b.jsonl", [(1, 0), (0, 0)])]
    index = index_shards(shards)
    write_merged(index, shards, tmp_path / "expected.jsonl")
    rows = list(merged_rows(index, shards, tmp_path / "merged.jsonl"))
    assert (tmp_path / "merged.jsonl").read_bytes() == (tmp_path / "expected.jsonl").read_bytes()
    assert rows == list(iter_rows(index, shards))

    partial = merged_rows(index, shards, tmp_path / "partial.jsonl")
    next(partial)
    partial.close()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a.jsonl", "b.jsonl", "expected.jsonl", "merged.jsonl"]
