"""The rows an aggregate reads: from a big source, read, parsed and stripped in a process of their own.

The aggregation runs on one core while the other idles (the servers are stopped by then), and reading a
result row back is a quarter of its work: about 5 µs to read and parse a 2.4 KB mcqa row, of 20 µs in all.
So a big source is read by a child (``aggregation_rows_process``), which strips each row (what the metrics
never read goes) and hands it over as compact JSON through a pipe: about 0.5 KB, which parse in 1.4 µs.
Shards merged into one file are copied there by the child as it reads them, byte for byte.

The rows are the in-process readers' less the stripped fields (``orjson`` gives back exactly the values it
read), and a bad row stops the reading with the same message. A source under ``IN_PROCESS_BELOW_BYTES`` is
read in-process, full rows and all: there a process would cost more than it saves. So is any source when the
process cannot be started.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Generator, Sequence
from pathlib import Path
from typing import IO, Any

import orjson
import polars as pl

from reverify_assets.errors import ReverifyError
from reverify_assets.lib.atomic_files import temporary_name
from reverify_assets.pipeline import aggregation_rows_process as child
from reverify_assets.pipeline.aggregation_rows_process import BAD_ROW_EXIT, NO_MERGED_FILE, Rows, as_generator
from reverify_assets.pipeline.shard_merge import iter_rows, merged_rows

# About 13,000 mcqa rows: below it, parsing them in-process costs no more than starting the process.
IN_PROCESS_BELOW_BYTES = 32 << 20
READ_BYTES = 1 << 20
PIPE_BYTES = 1 << 20  # Linux's default /proc/sys/fs/pipe-max-size
STOP_WAIT_S = 10.0


def rows_of_file(path: Path, *, in_process_below: int = IN_PROCESS_BELOW_BYTES) -> Rows:
    """Every row of the JSONL file ``path``, in file order."""
    if path.stat().st_size < in_process_below:
        return child.rows_of_file(path)
    return _rows_from_child(["file", str(path)], str(path), fallback=lambda: child.rows_of_file(path))


def rows_of_shards(
    index: pl.DataFrame,
    shards: Sequence[Path],
    merged: Path | None = None,
    on_merged: Callable[[], None] | None = None,
    *,
    in_process_below: int = IN_PROCESS_BELOW_BYTES,
) -> Rows:
    """The rows of ``shards`` in the order of ``index`` (``shard_merge.index_shards``). With ``merged`` each row is
    also copied to that file, moved into place once the last row is read; then ``on_merged`` is called. A reader
    that stops short leaves no merged file."""

    def in_process() -> Rows:
        if merged is None:
            return as_generator(iter_rows(index, shards))
        return merged_rows(index, shards, merged, on_merged)

    if sum(path.stat().st_size for path in shards) < in_process_below:
        return in_process()
    return _rows_of_shards_from_child(index, shards, merged, on_merged, in_process)


def _rows_of_shards_from_child(
    index: pl.DataFrame,
    shards: Sequence[Path],
    merged: Path | None,
    on_merged: Callable[[], None] | None,
    fallback: Callable[[], Rows],
) -> Rows:
    # The child writes the merged file under a name of ours, moved into place only once the rows have all been
    # read here: the child may finish first.
    staged = None if merged is None else temporary_name(merged)
    try:
        with tempfile.TemporaryDirectory(prefix="reverify-shard-index-") as folder:
            index_file = Path(folder) / "index.parquet"
            index.write_parquet(index_file)
            target = NO_MERGED_FILE if staged is None else str(staged)
            started = yield from _rows_from_child(
                ["shards", str(index_file), target, *map(str, shards)], f"{len(shards)} shard(s)", fallback
            )
        if not started:
            return  # the fallback merged them, and said so
        if merged is not None and staged is not None:
            os.replace(staged, merged)
    finally:
        if staged is not None:
            staged.unlink(missing_ok=True)
    if on_merged is not None:
        on_merged()


def _rows_from_child(
    arguments: list[str], source: str, fallback: Callable[[], Rows]
) -> Generator[dict[str, Any], None, bool]:
    """The child's rows; returns whether the child read them (False: it could not start, ``fallback`` did)."""
    with tempfile.TemporaryFile() as errors:
        read_end, write_end = os.pipe()
        _widen(write_end)
        try:
            # A session of its own: a Ctrl-C meant for the CLI does not print the child's traceback; closing the pipe
            # stops it (below).
            process = subprocess.Popen(
                [sys.executable, "-m", child.__name__, *arguments],
                stdin=subprocess.DEVNULL,
                stdout=write_end,
                stderr=errors,
                start_new_session=True,
            )
        except OSError:
            os.close(read_end)
            yield from fallback()
            return False
        finally:
            os.close(write_end)
        pipe = open(read_end, "rb", buffering=0)
        try:
            yield from _parsed_lines(pipe)
            code = process.wait()
        finally:
            # A child still writing gets EPIPE at its next row: it removes its temporary merged file and exits.
            pipe.close()
            try:
                process.wait(timeout=STOP_WAIT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if code != 0:
            raise _failure(code, errors, source)
    return True


def _widen(pipe: int) -> None:
    """Room in the pipe for many of the child's writes: with Linux's default 64 KiB, the child waited on each write
    until the reader had taken it all, and the two took turns instead of working at once."""
    try:
        fcntl.fcntl(pipe, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    except OSError:  # above the system's limit (/proc/sys/fs/pipe-max-size) for this user: the default it is
        pass


def _parsed_lines(pipe: IO[bytes]) -> Rows:
    loads = orjson.loads
    rest = b""
    while chunk := pipe.read(READ_BYTES):
        lines = (rest + chunk).split(b"\n")
        rest = lines.pop()
        for line in lines:
            yield loads(line)


def _failure(code: int, errors: IO[bytes], source: str) -> ReverifyError:
    errors.seek(0)
    said = errors.read().decode(errors="replace").strip()
    if code == BAD_ROW_EXIT:
        return ReverifyError(said)
    last = said.splitlines()[-1] if said else "nothing on stderr"
    return ReverifyError(f"the process reading the rows of {source} for the aggregate exited with {code}: {last}")
