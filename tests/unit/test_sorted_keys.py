"""Sort-based key operations agree with the obvious dict-based ones, including keys that cannot be packed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from reverify_assets.errors import InputError
from reverify_assets.keys.key_index import KeyIndex, join_rollouts_to_inputs
from reverify_assets.keys.sorted_keys import (
    duplicated_keys,
    first_row_of_each_key,
    key_in,
    packed_keys,
    positions_in,
    surely_unique_keys,
    take_sorted_by_key,
)

BIG = (1 << 62) + 5


EDGE = (1 << 63) - 1  # the largest int64


def keys_frame(keys: list[tuple[int, int]], **columns: list[object]) -> pl.DataFrame:
    return pl.DataFrame(
        {"task": [k[0] for k in keys], "rollout": [k[1] for k in keys], **columns},
        schema_overrides={"task": pl.Int64, "rollout": pl.Int64},
    )


@pytest.mark.parametrize(
    ("keys", "duplicated"),
    [
        ([], []),
        ([(0, 0), (0, 1), (1, 0)], []),
        ([(1, 0), (0, 0), (1, 0)], [(1, 0)]),
        ([(2, 2), (2, 2), (2, 2), (0, 1), (0, 1)], [(0, 1), (2, 2)]),
        ([(0, 1), (1, 0)], []),  # equal tasks or equal rollouts alone are not a duplicate
        ([(-3, BIG), (-3, BIG), (BIG, -3)], [(-3, BIG)]),
    ],
)
def test_duplicated_keys(keys: list[tuple[int, int]], duplicated: list[tuple[int, int]]) -> None:
    assert duplicated_keys(keys_frame(keys)).rows() == duplicated
    packs = packed_keys([keys_frame(keys)]) is not None  # the last case's keys do not
    assert surely_unique_keys(keys_frame(keys)) == (packs and not duplicated)


def test_first_row_of_each_key_keeps_the_lowest_by_order() -> None:
    frame = keys_frame([(1, 0), (0, 0), (1, 0), (0, 0), (2, 2)], file=[1, 1, 0, 1, 3], seen=["a", "b", "c", "d", "e"])
    kept = first_row_of_each_key(frame, order=["file"])
    assert kept.select("task", "rollout", "seen").rows() == [(0, 0, "b"), (1, 0, "c"), (2, 2, "e")]


@pytest.mark.parametrize(
    ("keys", "kept"),
    [
        ([], []),
        ([(0, 0), (0, 1), (1, 0), (5, 3)], [(0, 0), (0, 1), (1, 0), (5, 3)]),  # in order already: as it is
        ([(0, 1), (0, 0), (1, 0)], [(0, 0), (0, 1), (1, 0)]),  # out of order within a task
        ([(1, 0), (0, 5)], [(0, 5), (1, 0)]),  # out of order across tasks
        ([(0, 0), (0, 0), (1, 0)], [(0, 0), (1, 0)]),  # in order but a key twice
        ([(-3, BIG), (BIG, -3)], [(-3, BIG), (BIG, -3)]),
        ([(EDGE, 0), (-EDGE, 0)], [(-EDGE, 0), (EDGE, 0)]),  # their difference overflows int64
    ],
)
def test_first_row_of_each_key_sorts_only_what_needs_it(
    keys: list[tuple[int, int]], kept: list[tuple[int, int]]
) -> None:
    frame = keys_frame(keys, position=list(range(len(keys))))
    result = first_row_of_each_key(frame)
    assert result.select("task", "rollout").rows() == kept
    assert (result is frame) == (keys == kept)


@pytest.mark.parametrize(
    "keys",
    [
        [(0, 0), (0, 1), (1, 0), (5, 3)],
        [(-7, 2), (-7, -1), (3, -9), (0, 0)],
        [(10**9, 10**6), (0, 10**6 - 1)],
        [(0, -(2**62)), (2**22, -(2**62) + 2**40), (2**22, -(2**62))],  # packing wraps around on the way
    ],
)
def test_packed_keys_order_rows_as_the_pairs_do(keys: list[tuple[int, int]]) -> None:
    left, right = keys_frame(keys[:2]), keys_frame(keys[2:])
    packed = packed_keys([left, right])
    assert packed is not None
    flat = np.concatenate(packed).tolist()
    assert sorted(range(len(keys)), key=lambda i: flat[i]) == sorted(range(len(keys)), key=lambda i: keys[i])
    assert len(set(flat)) == len(set(keys))


@pytest.mark.parametrize(
    "keys",
    [
        [],
        [(0, 0), (0, 1), (1, 0)],  # in order already: as it is
        [(1, 0), (0, 1), (0, 0)],
        [(0, 1), (0, 0), (0, 1), (0, 0)],  # a key twice keeps its rows' order
        [(BIG, 0), (0, 0), (-3, BIG)],  # too far apart to pack
    ],
)
def test_take_sorted_by_key_is_a_stable_sort(keys: list[tuple[int, int]]) -> None:
    frame = keys_frame(keys, position=list(range(len(keys))))
    result = take_sorted_by_key(frame)
    expected = sorted(zip(keys, range(len(keys)), strict=True))
    assert result.rows() == [(*key, position) for key, position in expected]
    assert result.columns == ["task", "rollout", "position"]
    assert (result is frame) == (keys == sorted(keys))


def test_keys_too_far_apart_are_not_packed() -> None:
    assert packed_keys([keys_frame([(0, 0), (BIG, 1)]), keys_frame([(1, 1)])]) is None
    assert [len(keys) for keys in packed_keys([keys_frame([]), keys_frame([])]) or []] == [0, 0]


def test_positions_in() -> None:
    at, found = positions_in(np.array([2, 4, 9]), np.array([9, 3, 2, 10, 4]))
    assert found.tolist() == [True, False, True, False, True]
    assert at[found].tolist() == [2, 0, 1]


def index(keys: list[tuple[int, int]], path: str) -> KeyIndex:
    n = len(keys)
    return KeyIndex(Path(path), keys_frame(keys, offset=[10 * i for i in range(n)], line=list(range(1, n + 1))))


@pytest.mark.parametrize("far", [False, True], ids=["packed", "hash-join fallback"])
@pytest.mark.parametrize("inputs_in_order", [False, True])
@pytest.mark.parametrize("rollouts_in_order", [False, True])
def test_join_pairs_rows_sorted_by_key_either_way(far: bool, inputs_in_order: bool, rollouts_in_order: bool) -> None:
    last = BIG if far else 9
    input_keys, rollout_keys = [(last, 0), (0, 1), (0, 0), (4, 4)], [(0, 1), (last, 0), (0, 0)]
    inputs = index(sorted(input_keys) if inputs_in_order else input_keys, "in.jsonl")
    rollouts = index(sorted(rollout_keys) if rollouts_in_order else rollout_keys, "out.jsonl")
    plan = join_rollouts_to_inputs(inputs, rollouts)
    assert plan.columns == ["task", "rollout", "input_offset", "input_line", "rollout_offset", "rollout_line"]
    input_at = {key: (10 * i, i + 1) for i, key in enumerate(inputs.frame.select("task", "rollout").rows())}
    rollout_at = {key: (10 * i, i + 1) for i, key in enumerate(rollouts.frame.select("task", "rollout").rows())}
    assert plan.rows() == [(*key, *input_at[key], *rollout_at[key]) for key in sorted(rollout_keys)]


@pytest.mark.parametrize("far", [False, True], ids=["packed", "hash-join fallback"])
def test_join_names_the_first_rollout_without_input(far: bool) -> None:
    last = BIG if far else 9
    inputs = index([(0, 0), (last, 0)], "in.jsonl")
    rollouts = index([(0, 0), (7, 1), (3, 2)], "out.jsonl")
    with pytest.raises(InputError) as caught:
        join_rollouts_to_inputs(inputs, rollouts)
    assert (caught.value.path, caught.value.line, caught.value.key) == (Path("out.jsonl"), 2, "(task 7, rollout 1)")


@pytest.mark.parametrize(
    ("frame_keys", "keys", "expected"),
    [
        ([(0, 0), (1, 2), (3, 0)], [(1, 2), (1, 2), (7, 7)], [False, True, False]),
        ([(0, 0), (1, 2)], [], [False, False]),
        ([], [(1, 1)], []),
        ([(BIG, 0), (0, 0), (-1, 5)], [(-1, 5), (BIG, 0)], [True, False, True]),  # too far apart: joined
    ],
)
def test_key_in_marks_the_rows_whose_key_is_listed(
    frame_keys: list[tuple[int, int]], keys: list[tuple[int, int]], expected: list[bool]
) -> None:
    assert key_in(keys_frame(frame_keys), keys_frame(keys)).to_list() == expected
