"""An output's partition key: its absolute path, which Dagster must accept as a partition key.

Checked before anything starts (and before Dagster is imported, which the command overlaps with its start-up),
so the substrings Dagster refuses in a partition key are spelled here; a test holds them equal to Dagster's.
"""

from __future__ import annotations

from pathlib import Path

from reverify_assets.errors import ReverifyError

REFUSED_IN_PARTITION_KEYS = ("...", "\a", "\b", "\f", "\n", "\r", "\t", "\v", "\0")


def output_partition_key(output: Path, flag: str = "--output") -> str:
    key = str(output.resolve())
    if refused := [part for part in REFUSED_IN_PARTITION_KEYS if part in key]:
        raise ReverifyError(
            f"{flag} {str(output)!r}: its path is the output's Dagster partition key, which cannot hold {refused}; "
            "choose a path without them"
        )
    return key
