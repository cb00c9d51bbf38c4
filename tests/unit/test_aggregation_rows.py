"""An aggregate's rows read by a process of their own give what the in-process readers give, less the stripped
fields; a bad row stops them with the same message; a reader that stops short leaves nothing behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest

from reverify_assets.errors import InputError
from reverify_assets.rows.row_fields import strip_for_aggregation
from reverify_assets.run import aggregation_rows
from reverify_assets.run.aggregation_rows import rows_of_file, rows_of_shards
from reverify_assets.run.shard_merge import index_shards, iter_rows, merged_rows

CHILD = {"in_process_below": 0}  # every source is read by the process
IN_PROCESS = {"in_process_below": 1 << 40}


def result_row(task: int, rollout: int, **fields: Any) -> dict[str, Any]:
    return {
        "responses_create_params": {"input": [{"role": "user", "content": "Which? " * 50}]},
        "response": {"output": [{"type": "message", "content": "x" * 300}], "usage": {"input_tokens": 12}},
        "reward": 1.0,
        "_ng_task_index": task,
        "_ng_rollout_index": rollout,
        "agent_ref": {"name": "agent"},
        **fields,
    }


# Values whose text orjson writes otherwise than it read them, and values it reads in one way only.
ODD_VALUES: list[tuple[str, bytes]] = [
    ("a float written long", b"0.10000000000000000555"),
    ("an exponent", b"1E-7"),
    ("negative zero", b"-0.0"),
    ("an int beyond 64 bits, read as a float", b"18446744073709551616"),
    ("the largest uint64", b"18446744073709551615"),
    ("escaped unicode", b'"caf\\u00e9 \\ud83d\\ude00"'),
    ("a string with a newline", b'"two\\nlines"'),
    ("a field named twice (the last wins)", b'1, "odd": 2'),
    ("nested", b'{"a": [1, {"b": null}], "c": true}'),
    ("nested deeper than orjson writes", b"[" * 300 + b"0.1" + b"]" * 300),
    ("nested as deep as orjson reads", b"[" * 1000 + b"]" * 1000),
]


def write_rows(path: Path, rows: list[bytes]) -> Path:
    path.write_bytes(b"".join(row + b"\n" for row in rows))
    return path


def odd_row(task: int, value: bytes) -> bytes:
    return orjson.dumps(result_row(task, 0))[:-1] + b', "odd": ' + value + b"}"


@pytest.mark.parametrize("name,value", ODD_VALUES, ids=[name for name, _ in ODD_VALUES])
def test_a_file_read_by_the_process_gives_the_in_process_rows_stripped(tmp_path: Path, name: str, value: bytes) -> None:
    path = write_rows(tmp_path / "out.jsonl", [orjson.dumps(result_row(0, 0)), odd_row(1, value)])
    expected = [strip_for_aggregation(row) for row in rows_of_file(path, **IN_PROCESS)]
    got = list(rows_of_file(path, **CHILD))
    with deep_recursion():  # comparing and writing 1,000 levels of nesting
        assert got == expected
        assert json.dumps(got) == json.dumps(expected)  # the fields' order, -0.0 and the floats' bits too


@contextmanager
def deep_recursion() -> Iterator[None]:
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(10_000)
    try:
        yield
    finally:
        sys.setrecursionlimit(limit)


def test_a_bad_row_in_a_file_whose_name_is_not_utf8_is_named_as_in_process(tmp_path: Path) -> None:
    path = tmp_path / os.fsdecode(b"out\xff.jsonl")
    write_rows(path, [orjson.dumps(result_row(0, 0)), b"{"])
    with pytest.raises(InputError) as in_process:
        list(rows_of_file(path, **IN_PROCESS))
    assert (in_process.value.path, in_process.value.line) == (path, 2)
    with pytest.raises(InputError) as from_child:
        list(rows_of_file(path, **CHILD))
    assert vars(from_child.value) == vars(in_process.value)
    assert str(from_child.value) == str(in_process.value)  # the name as the in-process reader says it


BAD_LINES: list[tuple[str, bytes]] = [
    ("malformed JSON", b'{"_ng_task_index": 3,'),
    ("not an object", b"[1, 2]"),
    ("a blank line", b""),
]


@pytest.mark.parametrize("name,line", BAD_LINES, ids=[name for name, _ in BAD_LINES])
def test_a_bad_line_stops_the_process_with_the_in_process_message(tmp_path: Path, name: str, line: bytes) -> None:
    rows = [orjson.dumps(result_row(task, 0)) for task in range(2)] + [line, orjson.dumps(result_row(9, 0))]
    path = write_rows(tmp_path / "out.jsonl", rows)
    with pytest.raises(InputError) as in_process:
        list(rows_of_file(path, **IN_PROCESS))
    assert (in_process.value.path, in_process.value.line) == (path, 3)
    with pytest.raises(InputError) as from_child:
        list(rows_of_file(path, **CHILD))
    assert vars(from_child.value) == vars(in_process.value)
    assert str(from_child.value) == str(in_process.value)


def shards_of(tmp_path: Path) -> list[Path]:
    # Spacing orjson would not write, in the first shard: the merged file keeps it.
    first = [orjson.dumps(result_row(task, 0)).replace(b'"reward"', b' "reward"') for task in (4, 0, 2)]
    second = [orjson.dumps(result_row(task, 1, reward=0.5)) for task in (1, 0, 3)]
    return [write_rows(tmp_path / "a.jsonl", first), write_rows(tmp_path / "b.jsonl", second)]


@pytest.mark.parametrize("merge", [True, False])
def test_shards_read_by_the_process_give_the_in_process_rows_and_merged_file(tmp_path: Path, merge: bool) -> None:
    shards = shards_of(tmp_path)
    index = index_shards(shards)
    expected = [strip_for_aggregation(row) for row in iter_rows(index, shards)]
    if merge:
        for _ in merged_rows(index, shards, tmp_path / "expected.jsonl"):
            pass
    merged = tmp_path / "merged.jsonl" if merge else None
    got = list(rows_of_shards(index, shards, merged, **CHILD))
    assert got == expected
    if merge:
        assert (tmp_path / "merged.jsonl").read_bytes() == (tmp_path / "expected.jsonl").read_bytes()
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(
        ["a.jsonl", "b.jsonl", *(["expected.jsonl", "merged.jsonl"] if merge else [])]
    )


def test_a_reader_that_stops_short_leaves_no_merged_file_and_no_process(tmp_path: Path) -> None:
    shards = shards_of(tmp_path)
    rows = rows_of_shards(index_shards(shards), shards, tmp_path / "merged.jsonl", **CHILD)
    with closing(rows):
        next(rows)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a.jsonl", "b.jsonl"]
    assert children() == []


def children() -> list[int]:
    """This process's children running the reader."""
    found = subprocess.run(
        ["pgrep", "-P", str(os.getpid()), "-f", aggregation_rows.child.__name__], capture_output=True, text=True
    )
    return [int(pid) for pid in found.stdout.split()]


def test_a_child_that_does_not_stop_is_killed_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # More rows than the pipe holds: the child is still writing when the reader stops.
    big = [orjson.dumps(result_row(task, 0)) for task in range(3_000)]
    shards = [write_rows(tmp_path / "a.jsonl", big)]
    monkeypatch.setattr(aggregation_rows, "STOP_WAIT_S", 0.2)
    rows = rows_of_shards(index_shards(shards), shards, tmp_path / "merged.jsonl", **CHILD)
    next(rows)
    (pid,) = children()
    os.kill(pid, signal.SIGSTOP)  # as a child stuck on a slow disk would be
    rows.close()
    assert children() == []
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a.jsonl"]


def test_a_shard_changed_after_it_was_indexed_names_the_line(tmp_path: Path) -> None:
    shards = shards_of(tmp_path)
    index = index_shards(shards)
    lines = shards[1].read_bytes().splitlines(keepends=True)
    shards[1].write_bytes(lines[1] + lines[0] + lines[2])  # same length, rows swapped
    with pytest.raises(InputError) as caught:
        list(rows_of_shards(index, shards, tmp_path / "merged.jsonl", **CHILD))
    assert (caught.value.path, caught.value.line, caught.value.key) == (shards[1], 2, "(task 1, rollout 1)")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a.jsonl", "b.jsonl"]


def test_a_process_that_fails_otherwise_says_how(tmp_path: Path) -> None:
    shards = shards_of(tmp_path)
    index = index_shards(shards)
    shards[1].unlink()
    shards[1].mkdir()  # its size can be read, not its rows
    with pytest.raises(InputError) as caught:
        list(rows_of_shards(index, shards, **CHILD))
    # How it failed is the point: the exit code and the child's last word, which names the shard.
    assert f"exited with 1: IsADirectoryError: [Errno 21] Is a directory: '{shards[1]}'" in str(caught.value)


def test_a_process_that_cannot_start_leaves_the_reading_to_this_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_process(*args: object, **kwargs: object) -> None:
        raise OSError("no more processes")

    monkeypatch.setattr(aggregation_rows.subprocess, "Popen", no_process)
    path = write_rows(tmp_path / "out.jsonl", [orjson.dumps(result_row(task, 0)) for task in range(3)])
    assert [row["_ng_task_index"] for row in rows_of_file(path, **CHILD)] == [0, 1, 2]
    shards = shards_of(tmp_path)
    rows = list(rows_of_shards(index_shards(shards), shards, tmp_path / "m.jsonl", **CHILD))
    assert len(rows) == 6
    assert len((tmp_path / "m.jsonl").read_bytes().splitlines()) == 6


def test_the_process_runs_this_package_even_from_a_folder_holding_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    impostor = tmp_path / "elsewhere" / "reverify_assets"
    impostor.mkdir(parents=True)
    (impostor / "__init__.py").write_text("raise SystemExit('the copy in the current folder was imported')\n")
    monkeypatch.chdir(impostor.parent)
    path = write_rows(tmp_path / "out.jsonl", [orjson.dumps(result_row(task, 0)) for task in range(3)])
    assert [row["_ng_task_index"] for row in rows_of_file(path, **CHILD)] == [0, 1, 2]
