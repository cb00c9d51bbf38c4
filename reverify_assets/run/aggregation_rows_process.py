"""The process that reads an aggregate's rows for ``aggregation_rows``: each row parsed, stripped
(``strip_for_aggregation``) and written to stdout as one compact JSON line; shards merged on the way.

It stops at the first bad row with the in-process reader's error on stderr (pickled, for the parent to raise
as it is: ``raised_error``) and exit status ``BAD_ROW_EXIT``, and at a closed stdout (the reader stopped) without
a word, its merged file's temporary copy removed either way. A file source loads no polars.

    python -m reverify_assets.run.aggregation_rows_process file PATH
    python -m reverify_assets.run.aggregation_rows_process shards INDEX.parquet MERGED|- SHARD...
"""

from __future__ import annotations

import base64
import json
import os
import pickle
import sys
from collections.abc import Generator
from contextlib import closing
from pathlib import Path
from typing import Any

import orjson

from reverify_assets.errors import ReverifyError
from reverify_assets.files.jsonl import iter_jsonl
from reverify_assets.rows.row_fields import strip_for_aggregation

Rows = Generator[dict[str, Any], None, None]

BAD_ROW_EXIT = 3
NO_MERGED_FILE = "-"
# Written a piece at a time into a pipe that holds many (see ``aggregation_rows``): the reader starts on the
# first rows while the next are being made.
WRITE_BYTES = 1 << 16


def rows_of_file(path: Path) -> Rows:
    return (entry.row for entry in iter_jsonl(path))


def _source_rows(arguments: list[str]) -> Rows:
    kind, *rest = arguments
    if kind == "file":
        (path,) = rest
        return rows_of_file(Path(path))
    if kind == "shards":
        # Here, not above: a file source (the run's own output) has no use for polars' 40 MB and 0.1 s.
        import polars as pl

        from reverify_assets.run.shard_merge import iter_rows, merged_rows

        index_file, merged, *shards = rest
        index, paths = pl.read_parquet(index_file), [Path(shard) for shard in shards]
        if merged == NO_MERGED_FILE:
            return iter_rows(index, paths)
        return merged_rows(index, paths, Path(merged))
    raise SystemExit(f"the source must be 'file' or 'shards', not {kind!r}")


def compact_line(row: dict[str, Any]) -> bytes:
    """``row`` as one line of JSON that ``orjson.loads`` reads back as ``row``."""
    try:
        return orjson.dumps(row, option=orjson.OPT_APPEND_NEWLINE)
    except orjson.JSONEncodeError:
        # orjson reads 1,024 levels of nesting but writes 254: the standard library writes the rest, as exactly
        # (a float's repr reads back as the same float).
        return json.dumps(row, separators=(",", ":")).encode() + b"\n"


def main(arguments: list[str]) -> int:
    # orjson reads what json would need deeper recursion than Python's default 1,000 frames to write.
    sys.setrecursionlimit(10_000)
    rows = _source_rows(arguments)
    try:
        with closing(rows), os.fdopen(sys.stdout.fileno(), "wb", buffering=WRITE_BYTES, closefd=False) as out:
            for row in rows:
                out.write(compact_line(strip_for_aggregation(row)))
    except ReverifyError as exc:
        sys.stderr.buffer.write(error_record(exc))
        return BAD_ROW_EXIT
    except BrokenPipeError:
        return 1  # the reader stopped: nobody wants the rest
    return 0


def error_record(exc: ReverifyError) -> bytes:
    """``exc`` as one line, its class, message and fields, which ``raised_error`` makes the same error of (a file
    name that is not UTF-8 comes back as it was)."""
    return base64.b64encode(pickle.dumps(exc)) + b"\n"


def raised_error(said: str) -> ReverifyError | None:
    """The error the child raised, from its last line on stderr (``error_record``); None: ``said`` is a message."""
    try:
        error = pickle.loads(base64.b64decode(said.rsplit("\n", 1)[-1], validate=True))
    except Exception:  # no record (an empty line, a message, a traceback): whatever it is, it says why
        return None
    return error if isinstance(error, ReverifyError) else None


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
