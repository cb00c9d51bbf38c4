"""Whether the tests run in CI, where a missing service (PostgreSQL, Redis, the browser) is a broken setup, not a
skip."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def service_missing(what: str) -> NoReturn:
    """The test cannot have ``what`` here: in CI, which installs every service (.ci/run), that fails the test;
    elsewhere it is skipped."""
    if in_ci():
        pytest.fail(f"CI=true but {what}")
    pytest.skip(what)
