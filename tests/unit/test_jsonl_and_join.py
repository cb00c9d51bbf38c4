"""Reading JSONL, indexing keys and joining rollouts to inputs: every bad input names its file and line."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest

from reverify_assets.errors import InputError, ReadError
from reverify_assets.files.jsonl import (
    PREAD_FIRST_BYTES,
    LineAppender,
    iter_jsonl,
    pread_line,
    read_row_at,
    write_json_atomic,
)
from reverify_assets.keys.key_index import join_rollouts_to_inputs, scan_keys


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines))
    return path


def row(task: object, rollout: object, **extra: object) -> str:
    return orjson.dumps({"_ng_task_index": task, "_ng_rollout_index": rollout, **extra}).decode()


@pytest.mark.parametrize(
    ("lines", "line", "key", "words"),
    [
        ([row(0, 0), "", row(0, 1)], 2, None, None),  # a blank line
        ([row(0, 0), "   ", row(0, 1)], 2, None, None),  # blank but for spaces
        # The position is in the line, not after its line break: "line 1", where the line was cut.
        ([row(0, 0), '{"_ng_task_index": 0,'], 2, None, "malformed JSON: unexpected end of data: line 1 col"),
        (["[1, 2]"], 1, None, None),  # not an object
        ([row(0, 0), '{"_ng_rollout_index": 1}'], 2, None, None),  # no task index
        ([row("0", 0)], 1, None, None),  # a string task index
        ([row(0, True)], 1, None, None),  # a boolean rollout index
        ([row(0, 0), row(1, 0), row(0, 0)], 1, "(task 0, rollout 0)", None),  # a duplicate key, first at line 1
    ],
)
def test_scan_rejects_bad_lines_naming_file_and_line(
    tmp_path: Path, lines: list[str], line: int, key: str | None, words: str | None
) -> None:
    path = write_lines(tmp_path / "data.jsonl", lines)
    with pytest.raises(InputError) as caught:
        scan_keys(path)
    assert (caught.value.path, caught.value.line, caught.value.key) == (path, line, key)
    assert words is None or words in str(caught.value)


def test_scan_reports_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ReadError) as caught:
        scan_keys(tmp_path / "nope.jsonl")
    assert caught.value.path == tmp_path / "nope.jsonl"


def test_offsets_read_back_the_same_rows(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "data.jsonl", [row(2, 1, text="é" * 5), row(0, 0), row(1, 3, x=[1, 2])])
    index = scan_keys(path)
    with open(path, "rb") as fh:
        for entry, offset in zip(iter_jsonl(path), index.frame["offset"], strict=True):
            fh.seek(offset)
            assert orjson.loads(fh.readline()) == entry.row
    assert index.frame["line"].to_list() == [1, 2, 3]


def test_limit_counts_rows_in_file_order(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "r.jsonl", [row(5, 0), row(1, 0), row(3, 0)])
    assert scan_keys(path, limit=2).frame["task"].to_list() == [5, 1]


@pytest.mark.parametrize(
    ("inputs", "rollouts", "expected"),
    [
        ([(0, 0), (0, 1), (1, 0)], [(1, 0), (0, 1), (0, 0)], [(0, 0), (0, 1), (1, 0)]),
        ([(0, 0), (0, 1), (1, 0)], [(0, 1)], [(0, 1)]),  # inputs without a rollout are fine
        ([(42, 0), (99, 0)], [(99, 0), (42, 0)], [(42, 0), (99, 0)]),  # caller-given task indexes
    ],
)
def test_join_pairs_every_rollout_sorted_by_key(
    tmp_path: Path, inputs: list[tuple[int, int]], rollouts: list[tuple[int, int]], expected: list[tuple[int, int]]
) -> None:
    inputs_index = scan_keys(write_lines(tmp_path / "i.jsonl", [row(t, r) for t, r in inputs]))
    rollouts_index = scan_keys(write_lines(tmp_path / "r.jsonl", [row(t, r) for t, r in rollouts]))
    plan = join_rollouts_to_inputs(inputs_index, rollouts_index)
    assert list(zip(plan["task"], plan["rollout"], strict=True)) == expected


def test_join_names_the_rollout_without_an_input(tmp_path: Path) -> None:
    inputs_index = scan_keys(write_lines(tmp_path / "i.jsonl", [row(0, 0)]))
    rollouts_index = scan_keys(write_lines(tmp_path / "r.jsonl", [row(0, 0), row(7, 2), row(8, 0)]))
    with pytest.raises(InputError) as caught:
        join_rollouts_to_inputs(inputs_index, rollouts_index)
    assert (caught.value.path, caught.value.line, caught.value.key) == (tmp_path / "r.jsonl", 2, "(task 7, rollout 2)")
    assert "(1 more rollouts have no input row)" in str(caught.value)  # the others are counted, not named


@pytest.mark.parametrize(
    ("content", "offset", "line"),
    [
        (b"ab\ncd\n", 0, b"ab"),
        (b"ab\ncd\n", 3, b"cd"),
        (b"ab\r\ncd", 4, b"cd"),  # the last line may lack its line break
        (b"ab\r\ncd\n", 0, b"ab"),
        (b"ab\n", 3, b""),  # at the end of the file
        (b"x" * PREAD_FIRST_BYTES + b"\nrest\n", 0, b"x" * PREAD_FIRST_BYTES),  # the break just past the first read
        (b"y" * (5 * PREAD_FIRST_BYTES + 7) + b"\n", 0, b"y" * (5 * PREAD_FIRST_BYTES + 7)),  # several reads
        (b"z" * (3 * PREAD_FIRST_BYTES), 0, b"z" * (3 * PREAD_FIRST_BYTES)),  # a long last line without a break
    ],
)
def test_pread_line_reads_one_whole_line(tmp_path: Path, content: bytes, offset: int, line: bytes) -> None:
    path = tmp_path / "data.jsonl"
    path.write_bytes(content)
    fd = os.open(path, os.O_RDONLY)
    try:
        assert pread_line(fd, offset) == line
    finally:
        os.close(fd)


def test_line_appender_writes_whole_lines(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "out.jsonl"
    with LineAppender(path) as out:
        out.write_lines([b'{"a":1}\n', b'{"a":2}\n'])
        out.write_lines([])
    with LineAppender(path) as out:
        out.write_lines([b'{"a":3}\n'])
        assert out.lines_written == 1
    assert path.read_bytes() == b'{"a":1}\n{"a":2}\n{"a":3}\n'


def test_atomic_json_leaves_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "m.json"
    write_json_atomic(target, [{"x": 1}])
    assert orjson.loads(target.read_bytes()) == [{"x": 1}]
    assert [p.name for p in tmp_path.iterdir()] == ["m.json"]


def test_lines_ending_in_crlf_read_as_rows_by_line_and_by_offset(tmp_path: Path) -> None:
    path = tmp_path / "data.jsonl"
    path.write_bytes(f"{row(0, 0)}\r\n{row(1, 0, text='a b')}\r\n{row(2, 0)}".encode())
    lines = list(iter_jsonl(path))
    assert [line.row["_ng_task_index"] for line in lines] == [0, 1, 2]
    with path.open("rb") as fh:
        assert read_row_at(fh, lines[1].offset, path, 2) == {"_ng_task_index": 1, "_ng_rollout_index": 0, "text": "a b"}
