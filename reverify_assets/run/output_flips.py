"""A whole output's flips against the rewards its rollouts stored, for a run that added to an existing output.

A fresh run counts them in the verify loop, for nothing (see ``VerifyStats.stored_flips``); rows an earlier
run wrote were not in that loop, so a resumed output is read once here: its rows in file order, then each
row's rollout by one seek, in file order too. Costs about a second per 100,000 rows, paid only on resume.
"""

from __future__ import annotations

from array import array
from pathlib import Path

import polars as pl

from reverify_assets.compare.stored_flips import StoredRewardFlips
from reverify_assets.files.jsonl import iter_jsonl, read_row_at
from reverify_assets.keys.key_index import KEY_COLUMNS
from reverify_assets.keys.rollout_keys import row_key
from reverify_assets.rows.row_fields import is_masked, numeric_reward
from reverify_assets.run.output_summary import OutputSummary


def tally_output_flips(
    output: Path, plan: pl.DataFrame, rollouts: Path, summary: OutputSummary | None = None
) -> StoredRewardFlips:
    """``plan``: the join plan (``task``, ``rollout``, ``rollout_offset``, ``rollout_line``) of ``rollouts``.
    An output row whose key the plan lacks has no stored reward here (counted as unpaired). ``summary``, when
    given, is fed every output row on the way, so the caller need not read the output a second time."""
    tasks, rollout_numbers, masked = array("q"), array("q"), array("b")
    rewards: list[float | None] = []
    if output.exists():
        for entry in iter_jsonl(output):
            task, rollout = row_key(entry.row, output, entry.line_no)
            tasks.append(task)
            rollout_numbers.append(rollout)
            rewards.append(numeric_reward(entry.row))
            masked.append(is_masked(entry.row))
            if summary is not None:
                summary.add(entry.row)
    rows = pl.DataFrame(
        {"task": tasks, "rollout": rollout_numbers, "reward": rewards, "masked": masked},
        schema={"task": pl.Int64, "rollout": pl.Int64, "reward": pl.Float64, "masked": pl.Int8},
    )
    located = rows.join(plan.select(*KEY_COLUMNS, "rollout_offset", "rollout_line"), on=KEY_COLUMNS, how="left").sort(
        "rollout_offset", nulls_last=True
    )
    flips = StoredRewardFlips()
    with open(rollouts, "rb") as fh:
        for reward, row_masked, offset, line in located.select(
            "reward", "masked", "rollout_offset", "rollout_line"
        ).iter_rows():
            if offset is None:
                flips.add(None, reward, masked=bool(row_masked))
                continue
            stored = read_row_at(fh, offset, rollouts, line)
            flips.add(numeric_reward(stored), reward, masked=bool(row_masked) or is_masked(stored))
    return flips
