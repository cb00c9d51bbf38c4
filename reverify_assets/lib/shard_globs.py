"""Which files ``--input-glob`` names: comma-separated globs, deduplicated, auxiliary files skipped."""

from __future__ import annotations

import glob
from pathlib import Path

from reverify_assets.lib.file_names import is_auxiliary_jsonl


def expand_input_glob(patterns: str) -> list[Path]:
    """Each pattern's matches sorted; the first time a file is named wins its place; sidecars left out."""
    seen: dict[Path, None] = {}
    for pattern in (part.strip() for part in patterns.split(",")):
        if not pattern:
            continue
        for match in sorted(glob.glob(pattern)):
            path = Path(match)
            if path.is_file() and not is_auxiliary_jsonl(path):
                seen.setdefault(path, None)
    return list(seen)
