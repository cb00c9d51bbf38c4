"""Shards read back as one key-ordered stream; a key in two shards is refused, naming both places."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import orjson
import pytest

from reverify_assets.errors import InputError
from reverify_assets.rows.result_routing import PROVENANCE_FIELD, scoring_config
from reverify_assets.run.shard_merge import CountsByShard, index_shards, iter_rows, merged_rows


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
    for _ in merged_rows(index, shards, tmp_path / "merged.jsonl"):
        pass
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
    with pytest.raises(InputError) as caught:
        index_shards(shards)
    assert (caught.value.path, caught.value.line, caught.value.key) == (shards[0], 2, "(task 3, rollout 1)")
    assert f"{shards[2]}:1" in str(caught.value)  # the other shard: no field holds it


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


def test_merged_rows_copy_each_row_verbatim_and_a_reader_that_stops_short_leaves_no_file(tmp_path: Path) -> None:
    shards = [shard(tmp_path / "a.jsonl", [(2, 0), (0, 1)]), shard(tmp_path / "b.jsonl", [(1, 0), (0, 0)])]
    # Spacing orjson would not write: the merged file keeps it.
    (tmp_path / "a.jsonl").write_bytes((tmp_path / "a.jsonl").read_bytes().replace(b'"reward"', b' "reward"'))
    stored = {
        (row["_ng_task_index"], row["_ng_rollout_index"]): line
        for path in shards
        for line in path.read_bytes().splitlines(keepends=True)
        if (row := orjson.loads(line))
    }
    index = index_shards(shards)
    rows = list(merged_rows(index, shards, tmp_path / "merged.jsonl"))
    lines = (tmp_path / "merged.jsonl").read_bytes().splitlines(keepends=True)
    assert lines == [stored[key] for key in sorted(stored)]
    assert rows == list(iter_rows(index, shards)) == [orjson.loads(line) for line in lines]

    partial = merged_rows(index, shards, tmp_path / "partial.jsonl")
    next(partial)
    partial.close()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a.jsonl", "b.jsonl", "merged.jsonl"]


def test_a_key_read_otherwise_than_the_index_read_it_names_the_line(tmp_path: Path) -> None:
    """simdjson, which indexes, takes a field named twice at its first place; orjson, which parses, at its last."""
    path = tmp_path / "a.jsonl"
    path.write_bytes(
        b'{"_ng_task_index": 0, "_ng_rollout_index": 0}\n'
        b'{"_ng_task_index": 1, "_ng_task_index": 7, "_ng_rollout_index": 0}\n'
    )
    index = index_shards([path])
    with pytest.raises(InputError) as caught:
        list(iter_rows(index, [path]))
    assert (caught.value.path, caught.value.line, caught.value.key) == (path, 2, "(task 7, rollout 0)")


def test_a_shard_out_of_key_order_is_read_as_well(tmp_path: Path) -> None:
    shards = [shard(tmp_path / "a.jsonl", [(5, 0), (1, 0), (3, 0)]), shard(tmp_path / "b.jsonl", [(0, 0), (2, 0)])]
    index = index_shards(shards)
    assert [row["_ng_task_index"] for row in iter_rows(index, shards)] == [0, 1, 2, 3, 5]


PROVENANCE_VALUES = [None, "x", 5, [1], {}, {"config_hash": ""}, {"config_hash": 5}, {"config_hash": "c"}]


def test_the_fast_scan_counts_configs_as_the_parsed_rows_name_them(tmp_path: Path) -> None:
    rows = [{"_ng_task_index": 0, "_ng_rollout_index": 0}]  # no provenance at all
    rows += [
        {"_ng_task_index": task, "_ng_rollout_index": 0, PROVENANCE_FIELD: value}
        for task, value in enumerate(PROVENANCE_VALUES, start=1)
    ]
    path = tmp_path / "a.jsonl"
    path.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))
    counts = CountsByShard((PROVENANCE_FIELD,), scoring_config)
    index_shards([path], counts)
    assert counts.by_shard == [Counter(scoring_config(row) for row in rows)]
    assert counts.by_shard[0]["c"] == 1
