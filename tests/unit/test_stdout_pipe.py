"""The console script without standard output (a closed descriptor): printing is not an error.

A reader that leaves early (`| head`) is tested end to end, with `reverify aggregate`, in
tests/e2e/test_aggregate_serve_dagster.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REVERIFY = str(Path(sys.executable).parent / "reverify")


def test_printing_with_standard_output_closed_is_not_an_error() -> None:
    done = subprocess.run(
        [REVERIFY, "--help"], stderr=subprocess.PIPE, text=True, timeout=60, preexec_fn=lambda: os.close(1)
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr
