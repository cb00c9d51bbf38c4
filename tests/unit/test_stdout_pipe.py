"""The console script without standard output (a closed descriptor): printing is not an error.

A reader that leaves early (`| head`) is tested end to end, with `reverify aggregate`, in
tests/e2e/test_aggregate_serve_dagster.py.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.support.cli import CLI_LIMIT_S, MCQA_CONFIG, REVERIFY


@pytest.mark.parametrize(
    ("args", "exit_code", "said"),
    [
        (["--help"], 0, ""),  # argparse exits from inside main
        (["aggregate", "--config", str(MCQA_CONFIG), "-i", "/nonexistent/*.jsonl", "-o", "x.jsonl"], 1, "No shards"),
    ],
)
def test_standard_output_closed_is_not_an_error(args: list[str], exit_code: int, said: str, tmp_path: Path) -> None:
    done = subprocess.run(
        [REVERIFY, *args],
        stderr=subprocess.PIPE,
        text=True,
        timeout=CLI_LIMIT_S,
        cwd=tmp_path,
        preexec_fn=lambda: os.close(1),
    )
    assert done.returncode == exit_code, done.stderr
    assert said in done.stderr
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr
