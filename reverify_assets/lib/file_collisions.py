"""Whether a file a run writes is one it reads: a path can name a source under another name.

``--output o.jsonl`` writes ``o_failures.jsonl`` and ``o_aggregate_metrics.json``: with ``--overwrite``, a
``--rollouts o_failures.jsonl`` was deleted before the run failed. Paths are compared as the file system
resolves them (symbolic links, ``..``), and files that exist by device and inode (hard links).
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from pathlib import Path

from reverify_assets.errors import ReverifyError


def same_file(a: Path, b: Path) -> bool:
    if os.path.realpath(a) == os.path.realpath(b):  # unlike Path.resolve, says nothing of a symbolic link loop
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet): only the resolved paths could tell
        return False


def check_no_collision(
    written: Mapping[str, Path], sources: Mapping[str, Path], allowed: Collection[tuple[str, str]] = ()
) -> None:
    """Raises naming both files when one the run writes (``written``: role -> path) is one of its ``sources``;
    ``allowed`` holds the (written role, source role) pairs a mode writes on purpose."""
    for role, path in written.items():
        for source_role, source in sources.items():
            if (role, source_role) not in allowed and same_file(path, source):
                raise ReverifyError(
                    f"{role} {path} is the same file as {source_role} {source}: the run would write over one of "
                    "its own sources. Choose another --output."
                )
