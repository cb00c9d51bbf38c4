"""The simdjson scans of the inputs and rollouts agree with the line-by-line scan: same index, same errors."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import orjson
import polars as pl
import pytest
import simdjson

from reverify_assets.errors import InputError, ReadError, ReverifyError
from reverify_assets.files.jsonl import JsonlLine
from reverify_assets.keys import key_columns
from reverify_assets.keys import scan_process as key_scan_process
from reverify_assets.keys.key_columns import scan_key_columns
from reverify_assets.keys.key_index import scan_keys
from reverify_assets.keys.rollout_keys import RolloutKey
from reverify_assets.rows.payload import has_response, missing_response_message
from reverify_assets.run.preparation import _scan_inputs_by_line, index_inputs, index_rollouts

AGENT = {"type": "responses_api_agents", "name": "a"}


def row(task: object, rollout: object, **extra: object) -> bytes:
    return orjson.dumps({"_ng_task_index": task, "_ng_rollout_index": rollout, **extra})


def rollout(task: object, rollout_: object, **extra: object) -> bytes:
    return row(task, rollout_, response={"output": []}, **extra)


def write(path: Path, lines: list[bytes], end: bytes = b"\n") -> Path:
    path.write_bytes(b"".join(line + end for line in lines))
    return path


def exact_rollouts(path: Path, limit: int | None = None) -> pl.DataFrame:
    def require_response(entry: JsonlLine, key: RolloutKey) -> None:
        if not has_response(entry.row):
            raise ReverifyError(f"{path}:{entry.line_no}: {missing_response_message(entry.row, key)}")

    return scan_keys(path, check=require_response, limit=limit, with_prompts=True).frame


def outcome(scan: Callable[[], object]) -> object:
    try:
        return scan()
    except ReverifyError as exc:
        return f"error: {exc}"


GOOD = [rollout(2, 1), rollout(0, 0, note="é" * 3), rollout(1, 3, x=[1, {"y": None}])]


@pytest.mark.parametrize(
    "lines",
    [
        GOOD,
        [*GOOD, b""],  # a blank line
        [*GOOD, b"   "],
        [GOOD[0], b'{"_ng_task_index": 0,'],  # malformed
        [b"[1, 2]"],
        [GOOD[0], orjson.dumps({"_ng_rollout_index": 1, "response": {}})],  # key missing
        [rollout(0, None)],  # key null
        [rollout("0", 0)],
        [rollout(0, True)],
        [rollout(1.0, 0)],
        [b'{"_ng_task_index": 123456789012345678901234, "_ng_rollout_index": 0, "response": {}}'],
        [GOOD[0], row(5, 0)],  # response missing
        [GOOD[0], row(5, 0, response=None)],  # response null: none either
        [GOOD[0], row(5, 0, response="text")],  # not an object, but there: the verify step decides
        [*GOOD, GOOD[1]],  # duplicate key
        [rollout(3, 0, meta={"_ng_task_index": 9, "_ng_rollout_index": 9})],  # nested keys
        [b'{"_ng_task_index": 0, "_ng_rollout_index": 0, "response": {}, "s": "\\ud83d\\ude00"}'],
        [b'{"_ng_task_index": 0, "_ng_rollout_index": 0, "response": {}, "s": "\xff"}'],  # not UTF-8
        [b'{"_ng_task_index": 0, "_ng_rollout_index": 0, "response": {}, "s": "\\ud800"}'],  # a lone surrogate
        [b'{"_ng_task_index": 9223372036854775808, "_ng_rollout_index": 0, "response": {}}'],  # beyond int64
        [b'{"_ng_task_index": 0, "_ng_rollout_index": 0, "response": {}, "big": 123456789012345678901234}'],
        [rollout(-1, 0)],
        [GOOD[0], rollout(0, -3)],
        [b"\xef\xbb\xbf" + GOOD[0]],  # a byte order mark: simdjson would skip it, orjson refuses it
        [GOOD[0], b"\xef\xbb\xbf" + GOOD[1]],
        [],
    ],
)
@pytest.mark.parametrize("end", [b"\n", b"\r\n"])
def test_rollouts_scan_matches_the_line_by_line_scan(tmp_path: Path, lines: list[bytes], end: bytes) -> None:
    path = write(tmp_path / "rollouts.jsonl", lines, end)
    fast = outcome(lambda: index_rollouts(path).frame)
    exact = outcome(lambda: exact_rollouts(path))
    if isinstance(exact, pl.DataFrame):
        assert isinstance(fast, pl.DataFrame) and fast.equals(exact)
    else:
        assert fast == exact


@pytest.mark.parametrize(
    ("line", "key"),
    [
        (row(5, 0, response=None), "(task 5, rollout 0)"),  # a null response
        (rollout(-1, 0), None),  # a negative task index
        (rollout(0, -2), None),  # a negative rollout index
    ],
)
def test_a_null_response_and_a_negative_key_are_errors_naming_the_line(
    tmp_path: Path, line: bytes, key: str | None
) -> None:
    path = write(tmp_path / "rollouts.jsonl", [GOOD[0], line])
    with pytest.raises(InputError) as caught:
        index_rollouts(path)
    assert (caught.value.path, caught.value.line, caught.value.key) == (path, 2, key)


def test_a_last_line_without_newline_keeps_its_offset(tmp_path: Path) -> None:
    path = tmp_path / "rollouts.jsonl"
    path.write_bytes(b"\n".join(GOOD))
    assert index_rollouts(path).frame.equals(exact_rollouts(path))


@pytest.mark.parametrize("limit", [1, 2, 5])
def test_limit_ignores_rows_after_it(tmp_path: Path, limit: int) -> None:
    path = write(tmp_path / "rollouts.jsonl", [*GOOD, b"not json", row(9, 9)])
    fast = outcome(lambda: index_rollouts(path, limit=limit).frame)
    exact = outcome(lambda: exact_rollouts(path, limit=limit))
    if isinstance(exact, pl.DataFrame):
        assert isinstance(fast, pl.DataFrame) and fast.equals(exact)
    else:
        assert fast == exact


def test_a_blank_line_before_the_limit_is_still_an_error(tmp_path: Path) -> None:
    path = write(tmp_path / "rollouts.jsonl", [GOOD[0], b"", GOOD[1]])
    with pytest.raises(InputError) as caught:
        index_rollouts(path, limit=2)
    assert (caught.value.path, caught.value.line) == (path, 2)


@pytest.mark.parametrize(
    "routes",
    [
        [{"agent_ref": AGENT}] * 3,
        [{"agent_ref": AGENT}, {"agent_ref": {**AGENT, "name": "b"}}, {"agent_ref": AGENT}],
        [{"task_source": "s1"}, {}, {"task_source": "s2", "_ng_environment_server": "env"}, {}],
        [{"agent_ref": AGENT, "task_source": "s1"}, {"agent_ref": AGENT}, {"task_source": "s1"}],
    ],
)
def test_inputs_scan_numbers_routes_as_the_line_by_line_scan(tmp_path: Path, routes: list[dict[str, object]]) -> None:
    path = write(tmp_path / "inputs.jsonl", [row(i, 0, **fields) for i, fields in enumerate(routes)])
    fast, exact = index_inputs(path), _scan_inputs_by_line(path, reject_duplicates=True)
    assert fast.keys.frame.equals(exact.keys.frame)
    assert fast.route_of_row.equals(exact.route_of_row)
    assert fast.routes == exact.routes


PROMPT = {"input": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?\\n\u00e9"}]}


def materialized(task: int, rollout_: bytes, prompt: object = PROMPT, **extra: object) -> bytes:
    """A materialized input row as NeMo Gym writes it: the rollout index last, its JSON text given as is."""
    fields = {"responses_create_params": prompt, "agent_ref": AGENT, **extra, "_ng_task_index": task}
    return orjson.dumps(fields)[:-1] + b',"_ng_rollout_index":' + rollout_ + b"}"


OTHER_PROMPT = {"input": "2+3?"}


@pytest.mark.parametrize(
    "lines",
    [
        [materialized(task, str(at).encode()) for task in range(3) for at in range(4)],
        [materialized(0, b"0"), materialized(0, b" 1 "), materialized(0, b"2\t"), materialized(0, b"3} ")],
        [materialized(0, b"0"), materialized(0, b'"1"')],  # a string index: the row's error
        [materialized(0, b"0"), materialized(0, b"01")],  # not JSON
        [materialized(0, b"0"), materialized(0, b"-1")],
        [materialized(0, b"0"), materialized(0, b"1.0")],
        [materialized(0, b"0"), materialized(0, b"99999999999999999999")],  # beyond int64
        [materialized(0, b"0"), materialized(0, b'1,"x":2')],  # another field after it: parsed
        [materialized(0, b"0"), materialized(0, b"1}")],  # a brace too many
        [materialized(0, b"0"), materialized(0, b"0")],  # a duplicate key
        [materialized(0, b"0"), materialized(0, b"1", OTHER_PROMPT), materialized(0, b"2")],  # a changed prompt
        [materialized(0, b"0", meta={"_ng_rollout_index": 5}), materialized(0, b"1", meta={"_ng_rollout_index": 5})],
        [orjson.dumps({"_ng_rollout_index": 0, "_ng_task_index": 0, "m": {"_ng_rollout_index": 1}}), row(0, 1)],
        [materialized(0, b"0"), materialized(0, b"1") + b" "],
        [  # the name at the end of an escaped key's text: not the rollout index
            b'{"_ng_task_index":0,"_ng_rollout_index":0,"k\\"_ng_rollout_index":0}',
            b'{"_ng_task_index":0,"_ng_rollout_index":0,"k\\"_ng_rollout_index":1}',
        ],
    ],
)
@pytest.mark.parametrize("end", [b"\n", b"\r\n"])
def test_inputs_rows_repeated_but_for_the_rollout_index_index_as_the_line_by_line_scan(
    tmp_path: Path, lines: list[bytes], end: bytes
) -> None:
    """Rows that repeat the row before them are not parsed: what they would have given, they give."""
    path = write(tmp_path / "inputs.jsonl", lines, end)
    fast = outcome(lambda: index_inputs(path))
    exact = outcome(lambda: _scan_inputs_by_line(path, reject_duplicates=True))
    if isinstance(exact, str):
        assert fast == exact
        return
    assert not isinstance(fast, str) and fast.keys.frame.equals(exact.keys.frame)
    assert fast.route_of_row.equals(exact.route_of_row)
    assert fast.routes == exact.routes


def test_only_the_first_row_of_a_task_is_parsed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    parsed: list[bytes] = []

    class CountingParser(simdjson.Parser):
        def parse(self, raw: bytes) -> object:
            parsed.append(raw)
            return super().parse(raw)

    monkeypatch.setattr(key_columns.simdjson, "Parser", CountingParser)
    lines = [materialized(task, str(at).encode()) for task in range(3) for at in range(4)]
    columns = scan_key_columns(write(tmp_path / "inputs.jsonl", lines), with_routes=True, with_prompts=True)
    assert columns is not None and list(columns.rollouts) == [0, 1, 2, 3] * 3
    assert parsed == [lines[0], lines[4], lines[8]]


def test_inputs_with_one_route_spelled_two_ways_share_it(tmp_path: Path) -> None:
    path = write(
        tmp_path / "inputs.jsonl",
        [
            b'{"_ng_task_index": 0, "_ng_rollout_index": 0, "agent_ref": {"name": "a"}}',
            row(1, 0, agent_ref={"name": "a"}),
        ],
    )
    fast = index_inputs(path)
    assert fast.routes == [{"agent_ref": {"name": "a"}}]
    assert fast.route_of_row.to_list() == [0, 0]


def test_a_route_field_null_in_one_row_and_missing_in_another_are_two_routes(tmp_path: Path) -> None:
    """As the line-by-line scan numbers them; both route to the same server."""
    path = write(tmp_path / "inputs.jsonl", [row(0, 0, agent_ref=AGENT, task_source=None), row(1, 0, agent_ref=AGENT)])
    fast = index_inputs(path)
    assert fast.routes == [{"agent_ref": AGENT, "task_source": None}, {"agent_ref": AGENT}]
    assert fast.route_of_row.to_list() == [0, 1]


@pytest.mark.parametrize(
    "routes",
    [
        [{"agent_ref": {**AGENT, "extra": [1, 2.5, None]}}, {"agent_ref": AGENT}, {"agent_ref": AGENT}],
        [{"task_source": 5}, {"task_source": "5"}, {"task_source": 5.0}, {"task_source": True}, {"task_source": 1}],
        [{"agent_ref": ["a"]}, {"agent_ref": "a"}, {"agent_ref": {"name": "a"}}],
        [{"task_source": -0.0}, {"task_source": 0.0}, {"task_source": 0}],
    ],
)
def test_route_fields_of_other_json_types_number_as_the_line_by_line_scan(
    tmp_path: Path, routes: list[dict[str, object]]
) -> None:
    path = write(tmp_path / "inputs.jsonl", [row(i, 0, **fields) for i, fields in enumerate(routes)])
    assert scan_key_columns(path, with_routes=True) is not None  # the fast scan's own numbering, not a fallback
    fast, exact = index_inputs(path), _scan_inputs_by_line(path, reject_duplicates=True)
    assert fast.route_of_row.to_list() == exact.route_of_row.to_list()
    assert fast.routes == exact.routes


def test_inputs_errors_name_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path / "inputs.jsonl", [row(0, 0), row(1, None)])
    with pytest.raises(InputError) as caught:
        index_inputs(path)
    assert (caught.value.path, caught.value.line) == (path, 2)


def test_a_missing_file_is_reported_by_the_line_by_line_scan(tmp_path: Path) -> None:
    assert scan_key_columns(tmp_path / "nope.jsonl") is None
    with pytest.raises(ReadError) as caught:
        index_rollouts(tmp_path / "nope.jsonl")
    assert caught.value.path == tmp_path / "nope.jsonl"


@pytest.mark.parametrize("ends", [[b"\n", b"\n", b""], [b"\r\n", b"\r\n"], [b"\r\n", b"\n", b""], []])
@pytest.mark.parametrize("limit", [None, 10])
def test_line_offsets(tmp_path: Path, ends: list[bytes], limit: int | None) -> None:
    lines = [rollout(task, 0, pad="x" * task) for task in range(len(ends))]
    path = tmp_path / "f.jsonl"
    path.write_bytes(b"".join(line + end for line, end in zip(lines, ends, strict=True)))
    offsets = [
        sum(len(line) + len(end) for line, end in zip(lines[:at], ends, strict=False)) for at in range(len(lines))
    ]
    columns = scan_key_columns(path, limit=limit)
    assert columns is not None and columns.offsets.tolist() == offsets
    assert columns.rows == len(lines)
    assert index_rollouts(path, limit=limit).frame.equals(exact_rollouts(path, limit=limit))


def test_a_blank_line_leaves_the_file_to_the_line_by_line_scan(tmp_path: Path) -> None:
    path = write(tmp_path / "f.jsonl", [row(0, 0), b"", row(1, 0)])
    assert scan_key_columns(path) is None
    assert scan_key_columns(path, limit=3) is None
    limited = scan_key_columns(path, limit=1)  # the blank line comes after the rows asked for
    assert limited is not None and limited.rows == 1


@pytest.mark.parametrize("block_bytes", [1, 7, 64, 1 << 20])
@pytest.mark.parametrize("end", [b"\n", b"\r\n"])
@pytest.mark.parametrize("last_end", [b"", b"\n"])
def test_files_read_in_pieces_index_as_one_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block_bytes: int, end: bytes, last_end: bytes
) -> None:
    lines = [rollout(task, 0, note="x" * (task * 5)) for task in range(12)]
    path = tmp_path / "r.jsonl"
    path.write_bytes(end.join(lines) + last_end)
    monkeypatch.setattr(key_columns, "BLOCK_BYTES", block_bytes)
    assert index_rollouts(path).frame.equals(exact_rollouts(path))
    assert index_rollouts(path, limit=5).frame.equals(exact_rollouts(path, limit=5))


@pytest.mark.parametrize("kind", ["inputs", "rollouts", "carried"])
@pytest.mark.parametrize("limit", [None, 7])
def test_the_scan_process_file_holds_what_the_scan_gives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, limit: int | None
) -> None:
    lines = [rollout(task, 0, agent_ref={**AGENT, "name": f"a{task % 3}"}, pad="x" * task) for task in range(12)]
    path = write(tmp_path / "f.jsonl", lines)
    monkeypatch.setattr(key_columns, "BLOCK_BYTES", 200)  # a few rows a block
    output = tmp_path / "f.keys"
    key_scan_process.write_columns(path, kind, limit, output)
    expected = scan_key_columns(
        path,
        with_routes=kind == "inputs",
        with_prompts=kind in key_scan_process.PROMPTED,
        require_response=kind == "rollouts",
        limit=limit,
    )
    assert key_scan_process.read_columns(output) == expected
    assert expected is not None and expected.rows == (limit or 12)


@pytest.mark.parametrize(
    ("lines", "end", "last_end"),
    [
        ([rollout(task, 0, pad="x" * (task * 7 % 23)) for task in range(9)], b"\n", b"\n"),
        ([rollout(task, 0) for task in range(9)], b"\r\n", b""),  # the last line without its line break
        ([rollout(0, 0)], b"\n", b"\n"),  # one line: the second half is empty
        ([rollout(0, 0), rollout(1, 0, pad="x" * 500)], b"\n", b""),  # the middle in the last line
        ([], b"\n", b""),
    ],
)
@pytest.mark.parametrize("block_bytes", [7, 1 << 20])
def test_a_file_scanned_in_halves_gives_the_whole_scan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lines: list[bytes], end: bytes, last_end: bytes, block_bytes: int
) -> None:
    path = tmp_path / "rollouts.jsonl"
    path.write_bytes(end.join(lines) + (last_end if lines else b""))
    monkeypatch.setattr(key_columns, "BLOCK_BYTES", block_bytes)
    halves = key_columns.FilePart.halves(path)
    assert halves[0].end == halves[1].start
    parts = [b for half in halves for b in key_columns.key_column_blocks(path, prompts=True, part=half)]
    whole = scan_key_columns(path, with_prompts=True)
    assert whole is not None
    assert key_columns.KeyColumns.joined(parts) == whole if parts else whole.rows == 0


def test_the_scan_process_file_says_when_the_exact_scan_must_judge(tmp_path: Path) -> None:
    path = write(tmp_path / "f.jsonl", [*GOOD, b"{bad"])
    output = tmp_path / "f.keys"
    key_scan_process.write_columns(path, "rollouts", None, output)
    assert key_scan_process.read_columns(output) is None


def test_rows_of_more_shapes_than_remembered_number_as_the_line_by_line_scan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(key_columns, "SHAPES_KEPT", 1)
    rows = [
        row(0, 0, agent_ref=AGENT),
        row(1, 0, agent_ref=AGENT, task_source="x"),
        row(2, 0, task_source="x", agent_ref=AGENT, extra=1),
        row(3, 0, agent_ref=AGENT, task_source="x"),
        row(4, 0, agent_ref=AGENT),
    ]
    path = write(tmp_path / "inputs.jsonl", rows)
    assert scan_key_columns(path, with_routes=True) is not None
    fast, exact = index_inputs(path), _scan_inputs_by_line(path, reject_duplicates=True)
    assert fast.route_of_row.to_list() == exact.route_of_row.to_list() == [0, 1, 1, 1, 0]
    assert fast.routes == exact.routes
