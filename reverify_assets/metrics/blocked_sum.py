"""``numpy.add.reduce`` of a long float64 sequence that arrives in pieces, holding one block at a time.

numpy sums a contiguous array pairwise: a node of n > 128 values is the sum of its first
``n // 2 - (n // 2) % 8`` values and of the rest, each summed the same way. So the sum of a whole
column is its subtrees' sums combined by that tree, and a subtree is summed by ``numpy.add.reduce`` of
its values alone: the values need only be materialised one block (a subtree of at most ``leaf``
values) at a time. (Each block's sum gets numpy's ``0.0 +``; that can turn a -0.0 node into 0.0, which
changes no nonzero sum and no final total, itself ``0.0 +`` the root.)
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

LEAF = 1 << 16
_BLOCK = 128  # numpy's pairwise block: below it nodes are not split
_UNROLL = 8


def _split(count: int) -> int:
    half = count // 2
    return half - half % _UNROLL


def leaf_sizes(count: int, leaf: int = LEAF) -> list[int]:
    """The sizes of the subtrees of numpy's pairwise tree over `count` values that hold at most `leaf`
    values, each as large as possible, in order."""
    if count <= max(leaf, _BLOCK):
        return [count]
    half = _split(count)
    return leaf_sizes(half, leaf) + leaf_sizes(count - half, leaf)


class BlockedSum:
    """The sum of exactly `count` values, fed in order in pieces of any size."""

    def __init__(self, count: int, leaf: int = LEAF) -> None:
        self._count = count
        self._leaf = leaf
        self._sizes = iter(leaf_sizes(count, leaf)) if count else iter(())
        self._next = next(self._sizes, 0)
        self._pieces: list[np.ndarray] = []
        self._buffered = 0
        self._sums: list[float] = []

    def feed(self, piece: np.ndarray) -> None:
        self._pieces.append(piece)
        self._buffered += len(piece)
        while self._next and self._buffered >= self._next:
            values = np.concatenate(self._pieces) if len(self._pieces) > 1 else self._pieces[0]
            block, rest = values[: self._next], values[self._next :]
            with np.errstate(invalid="ignore", over="ignore"):  # infinities: NaN and overflow, as in Python
                self._sums.append(float(np.add.reduce(block)))
            self._pieces = [rest] if len(rest) else []
            self._buffered = len(rest)
            self._next = next(self._sizes, 0)

    def total(self) -> float:
        if self._next or self._buffered:
            raise ValueError(f"a sum of {self._count} values was fed {self._fed()} of them")
        if not self._count:
            return 0.0
        return 0.0 + _combine(self._count, iter(self._sums), self._leaf)

    def _fed(self) -> int:
        return sum(leaf_sizes(self._count, self._leaf)[: len(self._sums)]) + self._buffered


def _combine(count: int, sums: Iterator[float], leaf: int) -> float:
    if count <= max(leaf, _BLOCK):
        return next(sums)
    half = _split(count)
    return _combine(half, sums, leaf) + _combine(count - half, sums, leaf)
