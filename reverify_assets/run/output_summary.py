"""The figures of a whole output file, for runs that added to an existing one (resume, recovery)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Generator, Iterator
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reverify_assets.files.jsonl import iter_jsonl
from reverify_assets.rows.result_routing import PROVENANCE_FIELD

UNKNOWN_PROVENANCE = "unknown (no provenance: scored before reverify)"


@dataclass
class OutputSummary:
    rows: int = 0
    reward_sum: float = 0.0
    rows_by_config: Counter[str] = field(default_factory=Counter)

    @property
    def mean_reward(self) -> float | None:
        return self.reward_sum / self.rows if self.rows else None

    @property
    def known_configs(self) -> list[str]:
        return sorted(name for name in self.rows_by_config if name != UNKNOWN_PROVENANCE)

    def add(self, row: dict[str, Any]) -> None:
        self.rows += 1
        reward = row.get("reward")
        if isinstance(reward, int | float):
            self.reward_sum += reward
        stamp = row.get(PROVENANCE_FIELD)
        config = stamp.get("config_hash") if isinstance(stamp, dict) else None
        self.rows_by_config[config if isinstance(config, str) else UNKNOWN_PROVENANCE] += 1

    def count_passing(self, rows: Generator[dict[str, Any], None, None]) -> Iterator[dict[str, Any]]:
        """``rows`` as they come, each added as it passes: the figures of a stream another reader consumes,
        without reading its file again. Closing this closes ``rows``."""
        with closing(rows):
            for row in rows:
                self.add(row)
                yield row


def summarize_output(path: Path) -> OutputSummary:
    summary = OutputSummary()
    for entry in iter_jsonl(path):
        summary.add(entry.row)
    return summary
