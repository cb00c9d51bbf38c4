"""Counting what an aggregate covers while its rows stream past (the blocks: ``metrics.coverage``).

Three sources, none held whole in memory:

* the rows of the output, in key order, as the metrics read them: each is *scored*;
* the failures sidecar(s): small, unsorted, one row per failed attempt; the only keys held in a set. A key
  counts once (its last row names its class), and not at all when the output scored it after all;
* the keys the run expected (its plan: a key index, four integers a row), walked in key order alongside the
  output; an expected key neither scored nor failed is *missing*, and its row is read back (one seek) to
  learn which agent lost it. Without a plan, ``missing`` and ``expected`` are unknown.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import polars as pl

from reverify_assets.errors import InputError
from reverify_assets.files.jsonl import read_row_at
from reverify_assets.keys.rollout_keys import ROLLOUT_FIELD, TASK_FIELD, RolloutKey, describe_key
from reverify_assets.keys.sorted_keys import first_row_of_each_key
from reverify_assets.metrics.coverage import Coverage, reward_value
from reverify_assets.resume.failed_keys import read_failed_keys
from reverify_assets.rows.result_routing import scoring_config

GroupKey = tuple[str, str | None]  # (agent, server instance): how the aggregate groups rows into entries
# A row's group and run label, or None for a row without a run label (NeMo Gym leaves those out).
GroupOf = Callable[[dict[str, Any]], tuple[GroupKey, str] | None]
_SLICE_ROWS = 1 << 16


@dataclass(frozen=True)
class PlannedKeys:
    """Keys a run expected, each with where its row is: ``frame`` has task, rollout, offset, line of ``path``."""

    frame: pl.DataFrame
    path: Path

    @classmethod
    def read_plan(cls, plan: Path, inputs: Path) -> PlannedKeys:
        """The keys of a verify plan's parquet file (see ``join_and_route``), found in the materialized inputs;
        only the four columns are read."""
        frame = pl.read_parquet(plan, columns=["task", "rollout", "input_offset", "input_line"])
        return cls(frame.rename({"input_offset": "offset", "input_line": "line"}), inputs)

    @classmethod
    def from_index(cls, index: pl.DataFrame, path: Path) -> PlannedKeys:
        """The keys of a key index of ``path`` (task, rollout, offset, line)."""
        return cls(index.select("task", "rollout", "offset", "line"), path)


@dataclass(frozen=True)
class CoverageSources:
    """Where an aggregate learns what it lacks. ``expected`` None: the run's plan is not known."""

    sidecars: tuple[Path, ...] = ()
    expected: tuple[PlannedKeys, ...] | None = None

    @classmethod
    def of(cls, sidecars: Sequence[Path], expected: Sequence[PlannedKeys] | None) -> CoverageSources:
        """Sidecars that exist, each once (an --append run's output sidecar may be its source's)."""
        unique: dict[Path, Path] = {}
        for path in sidecars:
            if path.exists():
                unique.setdefault(path.resolve(), path)
        return cls(tuple(unique.values()), None if expected is None else tuple(expected))


@dataclass
class GroupCoverage:
    """One entry's coverage, the configs that scored its rows, and the run labels its rows carried."""

    coverage: Coverage = field(default_factory=Coverage)
    rows_by_config: Counter[str] = field(default_factory=Counter)
    labels: set[str] = field(default_factory=set)


class CoverageTally:
    """Fed every output row in key order (``add``); ``finish`` gives each group's coverage."""

    def __init__(self, sources: CoverageSources, group_of: GroupOf) -> None:
        self._group_of = group_of
        # Each failed key with its last row's class and group (a later sidecar's row wins).
        self._failed = read_failed_keys(*sources.sidecars, note=group_of)
        self._expected = _ExpectedWalk(sources.expected) if sources.expected is not None else None
        self._groups: dict[GroupKey, GroupCoverage] = {}
        self._last: RolloutKey | None = None

    def add(self, row: dict[str, Any], group: GroupKey | None) -> None:
        """A scored row; ``group`` None for a row without a run label (no entry counts it)."""
        key = (row.get(TASK_FIELD, 0), row.get(ROLLOUT_FIELD, 0))
        if self._last is not None and key <= self._last:
            raise InputError(
                f"aggregate metrics: row {describe_key(key)} out of key order (after {describe_key(self._last)})",
                key=describe_key(key),
            )
        self._last = key
        self._failed.pop(key, None)  # failed once, scored later: scored
        if self._expected is not None:
            self._expected.pass_to(key, self._not_scored)
        if group is None:
            return
        entry = self._group(group)
        entry.coverage.scored += 1
        entry.coverage.reward_sum += reward_value(row)
        entry.rows_by_config[scoring_config(row)] += 1

    def finish(self) -> dict[GroupKey, GroupCoverage]:
        if self._expected is not None:
            self._expected.finish(self._not_scored)
        for failure in self._failed.values():
            if failure.noted is not None:
                group, label = failure.noted
                entry = self._group(group)
                entry.coverage.failed_by_class[failure.failure_class] += 1
                entry.labels.add(label)
        if self._expected is None:
            for entry in self._groups.values():
                entry.coverage.missing = None
        return self._groups

    def close(self) -> None:
        if self._expected is not None:
            self._expected.close()

    def _group(self, group: GroupKey) -> GroupCoverage:
        entry = self._groups.get(group)
        if entry is None:
            entry = self._groups[group] = GroupCoverage()
        return entry

    def _not_scored(self, key: RolloutKey, row: Callable[[], dict[str, Any]]) -> None:
        if key in self._failed:
            return  # counted as failed
        found = self._group_of(row())
        if found is not None:
            group, label = found
            entry = self._group(group)
            entry.coverage.missing = (entry.coverage.missing or 0) + 1
            entry.labels.add(label)


NotScored = Callable[[RolloutKey, Callable[[], dict[str, Any]]], None]


class _ExpectedWalk:
    """The expected keys in key order, consumed as the scored keys pass by."""

    def __init__(self, sources: Sequence[PlannedKeys]) -> None:
        self._paths = [source.path for source in sources]
        frames = [
            source.frame.select(
                pl.col("task").cast(pl.Int64),
                pl.col("rollout").cast(pl.Int64),
                pl.lit(position, dtype=pl.Int32).alias("file"),
                pl.col("offset").cast(pl.Int64),
                pl.col("line").cast(pl.Int64),
            )
            for position, source in enumerate(sources)
        ]
        keys = pl.concat(frames) if frames else pl.DataFrame(schema=_WALK_SCHEMA)
        self._rows = _iter_keys(first_row_of_each_key(keys, order=["file"]))
        self._handles: dict[int, IO[bytes]] = {}
        self._head = next(self._rows, None)

    def pass_to(self, key: RolloutKey, not_scored: NotScored) -> None:
        """Every expected key before ``key`` was not scored; ``key`` itself, if expected, was."""
        while self._head is not None and self._head[0] < key:
            self._report(self._head, not_scored)
            self._head = next(self._rows, None)
        if self._head is not None and self._head[0] == key:
            self._head = next(self._rows, None)

    def finish(self, not_scored: NotScored) -> None:
        while self._head is not None:
            self._report(self._head, not_scored)
            self._head = next(self._rows, None)

    def close(self) -> None:
        for handle in self._handles.values():
            handle.close()
        self._handles.clear()

    def _report(self, head: tuple[RolloutKey, int, int, int], not_scored: NotScored) -> None:
        key, file, offset, line = head
        not_scored(key, lambda: self._read(file, offset, line))

    def _read(self, file: int, offset: int, line: int) -> dict[str, Any]:
        handle = self._handles.get(file)
        if handle is None:
            handle = self._handles[file] = open(self._paths[file], "rb")  # closed in close()
        return read_row_at(handle, offset, self._paths[file], line)


_WALK_SCHEMA = {"task": pl.Int64, "rollout": pl.Int64, "file": pl.Int32, "offset": pl.Int64, "line": pl.Int64}


def _iter_keys(frame: pl.DataFrame) -> Iterator[tuple[RolloutKey, int, int, int]]:
    for part in frame.iter_slices(_SLICE_ROWS):
        columns = [part[name].to_list() for name in _WALK_SCHEMA]
        for task, rollout, file, offset, line in zip(*columns, strict=True):
            yield (task, rollout), file, offset, line
