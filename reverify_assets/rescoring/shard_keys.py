"""Shard partition keys: ``<source>.s<number>``, every rollout of a task in one shard.

Shard ``n`` of a source holds tasks ``[n * shard_tasks, (n + 1) * shard_tasks)``. Keys use only
``[A-Za-z0-9_.-]``: commas and ``|`` break Dagster's UI.
"""

from __future__ import annotations

import re

KEY_PATTERN = re.compile(r"^[A-Za-z0-9_.-]+$")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


def source_id(relative_name: str) -> str:
    """A source's name made safe for a partition key (dots are ours: they separate the shard number)."""
    cleaned = _UNSAFE.sub("-", relative_name).strip("-")
    return cleaned or "source"


def shard_key(source: str, number: int) -> str:
    key = f"{source}.s{number:05d}"
    if not KEY_PATTERN.match(key):
        raise ValueError(f"shard key {key!r} has characters outside [A-Za-z0-9_.-]")
    return key


def parse_shard_key(key: str) -> tuple[str, int]:
    source, dot, shard = key.rpartition(".")
    if not dot or not shard.startswith("s") or not shard[1:].isdigit():
        raise ValueError(f"{key!r} is not a shard key of the form <source>.s<number>")
    return source, int(shard[1:])


def task_range(number: int, shard_tasks: int) -> tuple[int, int]:
    """The half-open range of task indexes shard ``number`` holds."""
    return number * shard_tasks, (number + 1) * shard_tasks
