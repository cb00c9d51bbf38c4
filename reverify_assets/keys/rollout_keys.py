"""The join key of NeMo Gym rollouts: ``(_ng_task_index, _ng_rollout_index)`` and nothing else."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reverify_assets.errors import InputError

TASK_FIELD = "_ng_task_index"
ROLLOUT_FIELD = "_ng_rollout_index"

RolloutKey = tuple[int, int]
# NeMo Gym numbers tasks and rollouts from 0; every index of keys holds them as 64-bit integers.
INDEX_MAX = (1 << 63) - 1


def row_key(row: dict[str, Any], path: Path | str, line_no: int) -> RolloutKey:
    task = row.get(TASK_FIELD)
    rollout = row.get(ROLLOUT_FIELD)
    for field, value in ((TASK_FIELD, task), (ROLLOUT_FIELD, rollout)):
        # bool is an int subclass; `true` is not an index.
        if not isinstance(value, int) or isinstance(value, bool):
            found = "it is missing" if value is None else f"found {value!r}"
            raise InputError(f"{path}:{line_no}: `{field}` must be an integer ({found})", path=path, line=line_no)
        if value < 0:
            raise InputError(
                f"{path}:{line_no}: `{field}` must not be negative (found {value})", path=path, line=line_no
            )
        if value > INDEX_MAX:
            raise InputError(
                f"{path}:{line_no}: `{field}` must fit in 64 bits (found {value})", path=path, line=line_no
            )
    return task, rollout  # type: ignore[return-value]


def check_indexed_key(row: dict[str, Any], path: Path | str, line_no: int, indexed: RolloutKey) -> None:
    """A row read back at an index's offset must hold the key the index gave it. It does not when the file changed
    after it was indexed, or when the row names a key field twice: simdjson, which indexes, reads the first, and
    orjson, which parses rows, keeps the last."""
    found = row_key(row, path, line_no)
    if found != indexed:
        raise InputError(
            f"{path}:{line_no}: the row's key is {describe_key(found)}, where the index gave {describe_key(indexed)}: "
            f"the file changed after it was indexed (run again), or the row names {TASK_FIELD} or {ROLLOUT_FIELD} "
            "twice",
            path=path,
            line=line_no,
            key=describe_key(found),
        )


def describe_key(key: RolloutKey) -> str:
    return f"(task {key[0]}, rollout {key[1]})"
