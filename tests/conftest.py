"""Every test starts with Ctrl-C and SIGTERM handled as in a terminal's foreground job.

Whatever pytest inherited (a shell's background job, CI's included, ignores Ctrl-C) or a test's in-process
Dagster run left behind (Dagster sets SIGTERM to SIGINT's handler when a run ends: ignored, if Ctrl-C was): an
ignored signal is inherited by every command a test starts, which then, rightly, keeps ignoring it.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def signals_as_in_a_terminal() -> Iterator[None]:
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    yield
