"""Key operations done by sorting, not hashing.

polars' hash-based operations (``is_duplicated``, ``group_by``, joins) build tables that cost about 250 MB
for a million keys, several times the index they work on, and that memory stays with the process. Sorting
costs a copy of the key columns, and numpy's ``searchsorted`` and ``unique`` work within a few such copies.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

KEY_COLUMNS = ["task", "rollout"]
INT64_LIMIT = 1 << 63
# polars' row numbers (u32, or u64 in its big-index build): no frame has more rows than they count.
ROW_NUMBER_DTYPE = np.uint32 if pl.get_index_type() == pl.UInt32 else np.uint64
# Keys per slice when checking search results: 2 MB of int64, above glibc's mmap threshold, so each is returned.
CHECK_SLICE = 1 << 18
# In a frame sorted by key: the rows whose key is the one of the row before (null on the first row).
SAME_KEY_AS_PREVIOUS = (pl.col("task") == pl.col("task").shift(1)) & (pl.col("rollout") == pl.col("rollout").shift(1))
# Whether every row's key is greater than the one of the row before (true of no rows).
# Compared, not subtracted: a difference of two int64 keys can overflow.
STRICTLY_IN_KEY_ORDER = (
    (
        (pl.col("task") > pl.col("task").shift(1))
        | ((pl.col("task") == pl.col("task").shift(1)) & (pl.col("rollout") > pl.col("rollout").shift(1)))
    )
    .fill_null(True)
    .all()
)


def duplicated_keys(frame: pl.DataFrame) -> pl.DataFrame:
    """The keys (task, rollout) that appear more than once, sorted."""
    return frame.select(KEY_COLUMNS).sort(KEY_COLUMNS).filter(SAME_KEY_AS_PREVIOUS).unique(maintain_order=True)


def surely_unique_keys(frame: pl.DataFrame) -> bool:
    """True when no key appears twice, by sorted packed keys compared with their neighbours; False when one
    does, or when the keys are too far apart to pack. At a million rows the CLI held about 40 MB more after
    polars' sort (``duplicated_keys``), which need then run only to name the duplicates."""
    packed = packed_keys([frame])
    if packed is None:
        return False
    keys = packed[0]
    keys.sort()
    return not bool((keys[1:] == keys[:-1]).any())


def first_row_of_each_key(frame: pl.DataFrame, order: Sequence[str] = ()) -> pl.DataFrame:
    """The frame sorted by key, keeping for each key only its first row by the columns ``order``.

    A frame already in key order without a key twice (a join plan) is returned as it is: sorting a million
    keys costs about twice the frame in memory.
    """
    if frame.select(STRICTLY_IN_KEY_ORDER).item():
        return frame
    return frame.sort([*KEY_COLUMNS, *order], maintain_order=True).filter(~SAME_KEY_AS_PREVIOUS.fill_null(False))


def take_sorted_by_key(frame: pl.DataFrame) -> pl.DataFrame:
    """The frame's rows in key order (rows with the same key keep theirs); the frame itself if already so.

    Otherwise the frame's columns are taken out of it one at a time (it is left empty) and each is let go
    once its sorted copy is made, so a caller that held the frame alone holds one column more, not a second
    frame. Sorted on packed keys by a numpy argsort: at a million rows polars' sort on the two key columns
    peaked 67 MB above the frame, one whole gather 44 MB, this about 24 MB. Keys too far apart to pack are
    sorted by polars, and the frame is left as it is.
    """
    packed = packed_keys([frame])
    if packed is None:
        return frame.sort(KEY_COLUMNS, maintain_order=True)
    (keys,) = packed
    del packed
    if is_sorted(keys):
        return frame
    order = pl.Series(np.argsort(keys, kind="stable").astype(ROW_NUMBER_DTYPE))
    del keys
    columns = []
    for name in frame.columns:
        column = frame.drop_in_place(name)
        columns.append(column.gather(order))
        del column
    return pl.DataFrame(columns)


def is_sorted(keys: np.ndarray) -> bool:
    return bool((keys[1:] >= keys[:-1]).all())


def packed_keys(frames: Sequence[pl.DataFrame]) -> list[np.ndarray] | None:
    """Each frame's (task, rollout) as one int64 per row that orders rows as the pair does.

    None when the keys span too wide a range to fit (keys beyond a few billion tasks and rollouts).
    """
    tasks = [frame["task"].to_numpy() for frame in frames]
    rollouts = [frame["rollout"].to_numpy() for frame in frames]
    if not any(len(column) for column in tasks):
        return [np.zeros(0, dtype=np.int64) for _ in frames]
    task_min, task_max = _bounds(tasks)
    rollout_min, rollout_max = _bounds(rollouts)
    span = rollout_max - rollout_min + 1
    if (task_max - task_min + 1) * span >= INT64_LIMIT:
        return None
    return [_pack(task, task_min, span, rollout, rollout_min) for task, rollout in zip(tasks, rollouts, strict=True)]


def _pack(task: np.ndarray, task_min: int, span: int, rollout: np.ndarray, rollout_min: int) -> np.ndarray:
    """``(task - task_min) * span + (rollout - rollout_min)``, in one new array: a million keys' temporaries
    cost 8 MB each. Intermediate results may wrap around; the result, below 2**63, is exact all the same."""
    key = task.astype(np.int64, copy=True)
    key -= task_min
    key *= span
    key -= rollout_min
    key += rollout
    return key


def _bounds(columns: list[np.ndarray]) -> tuple[int, int]:
    present = [column for column in columns if len(column)]
    return min(int(column.min()) for column in present), max(int(column.max()) for column in present)


def positions_in(sorted_keys: np.ndarray, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each wanted key, its position in ``sorted_keys`` (0 where absent) and whether it is there at all.

    Checked a slice at a time: comparing a million keys at once made three 8 MB copies, at the moment the
    join holds the most.
    """
    at = np.searchsorted(sorted_keys, wanted)
    found = np.zeros(len(wanted), dtype=bool)
    if len(sorted_keys):
        np.minimum(at, len(sorted_keys) - 1, out=at)
        for start in range(0, len(wanted), CHECK_SLICE):
            end = start + CHECK_SLICE
            found[start:end] = sorted_keys[at[start:end]] == wanted[start:end]
    at[~found] = 0
    return at, found


def key_in(frame: pl.DataFrame, keys: pl.DataFrame) -> pl.Series:
    """Per row of ``frame``, whether its key is among ``keys`` (a semi join's mask, in frame order)."""
    packed = packed_keys([keys, frame])
    if packed is None:
        marked = keys.select(KEY_COLUMNS).unique().with_columns(pl.lit(True).alias("__in__"))
        joined = frame.select(KEY_COLUMNS).join(marked, on=KEY_COLUMNS, how="left", maintain_order="left")
        return joined["__in__"].fill_null(False).rename("in_keys")
    known, wanted = packed
    _, found = positions_in(np.unique(known), wanted)
    return pl.Series("in_keys", found)
