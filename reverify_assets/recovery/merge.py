"""The second half of judge recovery: successes carried into the output, and who scored what."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice
from pathlib import Path
from typing import TypeVar

import polars as pl

from reverify_assets.files.jsonl import LineAppender
from reverify_assets.keys.key_index import KeyIndex, scan_keys
from reverify_assets.recovery.judge_failures import iter_seed_lines, successes_to_seed
from reverify_assets.resume.settled_keys import KEY_SCHEMA

SEED_BATCH_LINES = 1024
T = TypeVar("T")


def seed_successes(successes: KeyIndex, output: Path) -> int:
    """Append every success whose key the output lacks; idempotent, so a re-run adds nothing."""
    has_rows = output.exists() and output.stat().st_size > 0
    in_output = scan_keys(output).frame if has_rows else pl.DataFrame(schema=KEY_SCHEMA)
    seeds = successes_to_seed(successes, in_output)
    with LineAppender(output) as appender:
        for batch in _batches(iter_seed_lines(successes.path, seeds), SEED_BATCH_LINES):
            appender.write_lines(batch)
    return seeds.height


def _batches(items: Iterable[T], size: int) -> Iterator[list[T]]:
    iterator = iter(items)
    while batch := list(islice(iterator, size)):
        yield batch
