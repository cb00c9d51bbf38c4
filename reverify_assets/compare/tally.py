"""What the pairs leave behind as they stream past: per compared row its task and two rewards (24 bytes),
per row each grouping's group number, each side's metrics input, and the flipped rows' lines."""

from __future__ import annotations

from array import array
from collections.abc import Sequence

import numpy as np

from reverify_assets.compare.breakdown import FieldGrouping, Uncompared
from reverify_assets.compare.flips import FlipsFile, flip_line
from reverify_assets.compare.key_metrics import SideKeyMetrics
from reverify_assets.compare.paired_rows import KeyedPair
from reverify_assets.compare.side_index import REWARD_FIELD

MASK_SAMPLE = "mask_sample"


class PairedColumns:
    def __init__(self) -> None:
        self._tasks: array[int] = array("q")
        self._baseline: array[float] = array("d")
        self._candidate: array[float] = array("d")

    def add(self, task: int, baseline: float, candidate: float) -> None:
        self._tasks.append(task)
        self._baseline.append(baseline)
        self._candidate.append(candidate)

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Baseline rewards, candidate rewards, tasks: one entry a compared row, in key order."""
        return (
            np.frombuffer(self._baseline, dtype=np.float64),
            np.frombuffer(self._candidate, dtype=np.float64),
            np.frombuffer(self._tasks, dtype=np.int64),
        )


class PairTally:
    def __init__(
        self,
        groupings: Sequence[FieldGrouping],
        metrics: tuple[SideKeyMetrics, SideKeyMetrics],
        flips: FlipsFile | None,
    ) -> None:
        self.columns = PairedColumns()
        self.masked = 0
        self._groupings = groupings
        self._metrics = metrics
        self._flips = flips

    def add(self, pair: KeyedPair) -> None:
        """The next key, in key order."""
        for side, row in zip(self._metrics, (pair.baseline, pair.candidate), strict=True):
            if row is not None:
                side.add(row)
        codes = [grouping.group_of(pair) for grouping in self._groupings]
        if pair.baseline is None or pair.candidate is None:
            kind = Uncompared.ONLY_BASELINE if pair.candidate is None else Uncompared.ONLY_CANDIDATE
        elif pair.baseline.get(MASK_SAMPLE) or pair.candidate.get(MASK_SAMPLE):
            # A masked reward stands in for a verdict the verifier could not give: not a measurement.
            kind = Uncompared.MASKED
            self.masked += 1
        else:
            rewards = float(pair.baseline[REWARD_FIELD]), float(pair.candidate[REWARD_FIELD])
            self.columns.add(pair.key[0], *rewards)
            for grouping, code in zip(self._groupings, codes, strict=True):
                grouping.add_compared(code)
            if rewards[0] != rewards[1] and self._flips is not None:
                self._flips.write(flip_line(pair.key, pair.baseline, pair.candidate, rewards))
            return
        for grouping, code in zip(self._groupings, codes, strict=True):
            grouping.add_uncompared(code, kind)
