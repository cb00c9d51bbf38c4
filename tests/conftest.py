"""Every test starts with Ctrl-C and SIGTERM handled as in a terminal's foreground job.

Whatever pytest inherited (a shell's background job, CI's included, ignores Ctrl-C) or a test's in-process
Dagster run left behind (Dagster sets SIGTERM to SIGINT's handler when a run ends: ignored, if Ctrl-C was): an
ignored signal is inherited by every command a test starts, which then, rightly, keeps ignoring it.

And the judge-call cache is off unless a test turns it on: tests count the calls a judge gets, and a cache
would answer a call another test made; none may write to the user's own Dagster home either.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest

from reverify_assets.judge_cache.store import CACHE_OFF, JUDGE_CACHE_ENV


@pytest.fixture(autouse=True)
def signals_as_in_a_terminal() -> Iterator[None]:
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    yield


@pytest.fixture(autouse=True)
def judge_cache_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(JUDGE_CACHE_ENV, CACHE_OFF)
