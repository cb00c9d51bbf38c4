"""What an earlier run already settled, read from its output and failures sidecar (NeMo Gym's rules).

A key is *done* when it is in the output, *terminal* when a sidecar row for it says
``_ng_failure_terminal``, *maxed out* when it has at least ``max_attempts`` sidecar rows;
anything else is verified (again).
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from reverify_assets.errors import ConfigError
from reverify_assets.files.jsonl import JsonlLine
from reverify_assets.keys.key_index import KEY_COLUMNS, scan_keys
from reverify_assets.keys.rollout_keys import RolloutKey
from reverify_assets.keys.sorted_keys import key_in
from reverify_assets.resume.failed_keys import read_failed_keys
from reverify_assets.rows.result_routing import scoring_config

DEFAULT_MAX_ATTEMPTS = 3
MAX_ATTEMPTS_ENV = "NEMO_GYM_MAX_ROLLOUT_ATTEMPTS"
KEY_SCHEMA = {"task": pl.Int64, "rollout": pl.Int64}


def max_attempts_from(flag: int | None) -> int:
    if flag is not None:
        return flag
    raw = os.environ.get(MAX_ATTEMPTS_ENV) or str(DEFAULT_MAX_ATTEMPTS)
    if not raw.isdigit() or int(raw) < 1:
        raise ConfigError(
            f"environment variable {MAX_ATTEMPTS_ENV}={raw!r} must be a whole number of at least 1",
            key=MAX_ATTEMPTS_ENV,
        )
    return int(raw)


@dataclass(frozen=True)
class CacheStatus:
    done: pl.DataFrame  # task, rollout
    terminal: pl.DataFrame
    maxed_out: pl.DataFrame
    max_attempts: int
    output_configs: Counter[str] = field(default_factory=Counter)  # the output's rows by scoring config

    @classmethod
    def empty(cls, max_attempts: int) -> CacheStatus:
        nothing = pl.DataFrame(schema=KEY_SCHEMA)
        return cls(nothing, nothing, nothing, max_attempts)

    def settled(self) -> pl.DataFrame:
        return pl.concat([self.done, self.terminal, self.maxed_out])

    def pending(self, plan: pl.DataFrame) -> pl.DataFrame:
        """The rows of ``plan`` (any frame with task, rollout) that still need a verify call."""
        return plan.filter(~key_in(plan, self.settled())).sort(KEY_COLUMNS)


def read_cache(output: Path, sidecar: Path, max_attempts: int) -> CacheStatus:
    configs: Counter[str] = Counter()

    def count_config(entry: JsonlLine, _: RolloutKey) -> None:
        configs[scoring_config(entry.row)] += 1

    done = (
        scan_keys(output, check=count_config).frame.select(KEY_COLUMNS)
        if output.exists()
        else CacheStatus.empty(0).done
    )
    failed = read_failed_keys(sidecar)
    terminal = [key for key, failure in failed.items() if failure.terminal]
    maxed = [key for key, failure in failed.items() if failure.attempts >= max_attempts]
    return CacheStatus(done, _key_frame(terminal), _key_frame(maxed), max_attempts, configs)


def _key_frame(keys: list[RolloutKey]) -> pl.DataFrame:
    pairs = sorted(keys)
    return pl.DataFrame({"task": [k[0] for k in pairs], "rollout": [k[1] for k in pairs]}, schema=KEY_SCHEMA)


def skip_counts(status: CacheStatus, planned: pl.DataFrame) -> tuple[tuple[int, int, int], pl.DataFrame]:
    """How many rows of ``planned`` a resume skips as done, terminal and maxed out (each row counted under the
    first that applies), and the rows left."""
    rest = planned
    counts = []
    for settled in (status.done, status.terminal, status.maxed_out):
        found = key_in(rest.select(KEY_COLUMNS), settled)
        counts.append(int(found.sum()))
        rest = rest.filter(~found)
    done, terminal, maxed = counts
    return (done, terminal, maxed), rest


def resume_summary(status: CacheStatus, planned: pl.DataFrame) -> list[str]:
    """Five lines, counted over the rows this run would verify (after --limit)."""
    (done, terminal, maxed), rest = skip_counts(status, planned.select(KEY_COLUMNS))
    pending = rest.height
    return [
        "Resumed from cache. Found:",
        f"  {done} rows already in the output",
        f"  {terminal} rows with a terminal failure in the sidecar",
        f"  {maxed} rows that failed {status.max_attempts} times or more",
        f"  {pending} rows that still need to be run",
    ]
