"""An output's figures (rows, mean reward, rows by verifier config), from its file or from a stream of its rows."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from reverify_assets.rows.result_routing import PROVENANCE_FIELD
from reverify_assets.run.output_summary import UNKNOWN_PROVENANCE, OutputSummary, summarize_output

ROWS: list[dict[str, Any]] = [
    {"reward": 1.0, PROVENANCE_FIELD: {"config_hash": "a"}},
    {"reward": 0, PROVENANCE_FIELD: {"config_hash": "a"}},
    {"reward": "high", PROVENANCE_FIELD: {"config_hash": "b"}},
    {"reward": 0.5},
]


def test_rows_counted_as_they_pass_give_the_figures_of_the_file(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    path.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in ROWS))
    passing = OutputSummary()
    assert list(passing.count_passing(row for row in ROWS)) == ROWS
    read = summarize_output(path)
    assert passing == read
    assert passing.rows_by_config == {"a": 2, "b": 1, UNKNOWN_PROVENANCE: 1}
    assert passing.mean_reward == 1.5 / 4


def test_closing_the_counted_stream_closes_the_rows() -> None:
    closed: list[bool] = []

    def rows() -> Iterator[dict[str, Any]]:
        try:
            yield from ROWS
        finally:
            closed.append(True)

    counted = OutputSummary().count_passing(rows())
    next(counted)
    counted.close()
    assert closed == [True]
