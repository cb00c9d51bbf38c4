"""The rows whose reward changed, one JSONL line each: key, agent, both rewards, both extracted answers.

For pass/fail rewards these are exactly the discordant pairs of the 2×2 table. Lines are written as the
pairs stream past, under a temporary name moved into place only when the comparison succeeds.
"""

from __future__ import annotations

from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO

import orjson

from reverify_assets.compare.paired_rows import Row
from reverify_assets.files.jsonl import AtomicWriter
from reverify_assets.keys.rollout_keys import ROLLOUT_FIELD, TASK_FIELD, RolloutKey
from reverify_assets.rows.result_routing import agent_name

EXTRACTED_ANSWER = "extracted_answer"


def flip_line(key: RolloutKey, baseline: Row, candidate: Row, rewards: tuple[float, float]) -> dict[str, Any]:
    line: dict[str, Any] = {
        TASK_FIELD: key[0],
        ROLLOUT_FIELD: key[1],
        "agent": agent_name(baseline) or agent_name(candidate),
        "baseline_reward": rewards[0],
        "candidate_reward": rewards[1],
    }
    # Only when the rows have the field: null would claim the verifier found no answer.
    for side, row in (("baseline", baseline), ("candidate", candidate)):
        if EXTRACTED_ANSWER in row:
            line[f"{side}_{EXTRACTED_ANSWER}"] = row[EXTRACTED_ANSWER]
    return line


class FlipsFile:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.rows = 0
        self._writer = AtomicWriter(path)
        self._fh: BinaryIO | None = None

    def write(self, line: dict[str, Any]) -> None:
        assert self._fh is not None, "write inside `with`"
        self._fh.write(orjson.dumps(line) + b"\n")
        self.rows += 1

    def __enter__(self) -> FlipsFile:
        self._fh = self._writer.__enter__()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._writer.__exit__(exc_type, exc, tb)
        self._fh = None
