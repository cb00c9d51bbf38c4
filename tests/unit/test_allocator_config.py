"""The CLI's jemalloc options for polars survive a parent process that imported polars."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from reverify_assets.cli.main import POLARS_ALLOCATOR_CONFIG, polars_allocator_config

POLARS_DEFAULTS = "dirty_decay_ms:500,muzzy_decay_ms:1000"


@pytest.mark.parametrize(
    ("inherited", "expected"),
    [
        (None, POLARS_ALLOCATOR_CONFIG),
        ("", POLARS_ALLOCATOR_CONFIG),
        (POLARS_DEFAULTS, POLARS_ALLOCATOR_CONFIG),  # a parent imported polars
        (f"{POLARS_DEFAULTS},{POLARS_DEFAULTS}", POLARS_ALLOCATOR_CONFIG),  # and its parent too
        (f"{POLARS_DEFAULTS},thp:always", f"{POLARS_ALLOCATOR_CONFIG},thp:always"),
        ("dirty_decay_ms:7", f"{POLARS_ALLOCATOR_CONFIG},dirty_decay_ms:7"),  # the user's own: last, so it wins
    ],
)
def test_our_options_come_before_the_users_and_replace_polars_defaults(inherited: str | None, expected: str) -> None:
    assert polars_allocator_config(inherited) == expected


def test_polars_still_writes_the_defaults_we_recognise() -> None:
    """If polars changes what its import writes, a parent's defaults would override ours again: caught here."""
    env = {name: value for name, value in os.environ.items() if name != "_RJEM_MALLOC_CONF"}
    written = subprocess.run(
        [sys.executable, "-c", "import os, polars; print(os.environ['_RJEM_MALLOC_CONF'])"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert written == POLARS_DEFAULTS
