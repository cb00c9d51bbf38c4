"""Whether the tests run in CI, where a missing service (PostgreSQL, the browser) is a broken setup, not a skip."""

from __future__ import annotations

import os


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}
