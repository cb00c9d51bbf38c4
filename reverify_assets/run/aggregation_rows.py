"""The rows an aggregate reads: from a big source, read, parsed and stripped in a process of their own.

The aggregation runs on one core while the other idles (the servers are stopped by then), and reading a
result row back is a quarter of its work: about 5 µs to read and parse a 2.4 KB mcqa row, of 20 µs in all.
So a big source is read by a child (``aggregation_rows_process``), which strips each row (what the metrics
never read goes) and hands it over as compact JSON through a pipe: about 0.5 KB, which parse in 1.4 µs.
Shards merged into one file are copied there by the child as it reads them, byte for byte.

The rows are the in-process readers' less the stripped fields, values and field order alike, and a bad row
stops the reading with the same message. A source under ``IN_PROCESS_BELOW_BYTES`` (shards:
``SHARDS_IN_PROCESS_BELOW_BYTES``) is read in-process, full rows and all: there a process would cost more than
it saves. So is any source when the process cannot be started.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import tempfile
from collections.abc import Generator, Sequence
from pathlib import Path
from typing import IO, Any

import orjson
import polars as pl

from reverify_assets.errors import InputError, ReverifyError
from reverify_assets.processes.child_python import child_environment, module_command
from reverify_assets.run import aggregation_rows_process as child
from reverify_assets.run.aggregation_rows_process import BAD_ROW_EXIT, NO_MERGED_FILE, Rows
from reverify_assets.run.shard_merge import iter_rows, merged_rows

# About 13,000 mcqa rows: below it, parsing them in-process costs no more than starting the process (0.04 s
# to its first row).
IN_PROCESS_BELOW_BYTES = 32 << 20
# The child of shards loads polars for their index: 0.19 s to its first row.
SHARDS_IN_PROCESS_BELOW_BYTES = 96 << 20
READ_BYTES = 1 << 20
PIPE_BYTES = 1 << 20  # Linux's default /proc/sys/fs/pipe-max-size
STOP_WAIT_S = 10.0


def rows_of_file(path: Path, *, in_process_below: int = IN_PROCESS_BELOW_BYTES) -> Rows:
    """Every row of the JSONL file ``path``, in file order."""
    if path.stat().st_size < in_process_below:
        return child.rows_of_file(path)
    return _rows_of_file_from_child(path)


def _rows_of_file_from_child(path: Path) -> Rows:
    if not (yield from _rows_from_child(["file", str(path)], str(path), path)):
        yield from child.rows_of_file(path)


def rows_of_shards(
    index: pl.DataFrame,
    shards: Sequence[Path],
    merged: Path | None = None,
    *,
    in_process_below: int = SHARDS_IN_PROCESS_BELOW_BYTES,
) -> Rows:
    """The rows of ``shards`` in the order of ``index`` (``shard_merge.index_shards``). With ``merged`` each row is
    also copied to that file, moved into place once the last row is read. A reader that stops short leaves no
    merged file."""
    if sum(path.stat().st_size for path in shards) < in_process_below:
        return _rows_of_shards_in_process(index, shards, merged)
    return _rows_of_shards_from_child(index, shards, merged)


def _rows_of_shards_in_process(index: pl.DataFrame, shards: Sequence[Path], merged: Path | None) -> Rows:
    if merged is None:
        return iter_rows(index, shards)
    return merged_rows(index, shards, merged)


def _rows_of_shards_from_child(index: pl.DataFrame, shards: Sequence[Path], merged: Path | None) -> Rows:
    if merged is not None:
        merged.parent.mkdir(parents=True, exist_ok=True)
    # Next to the merged file, so that moving it out is a rename; whatever the child leaves (killed mid-write, say)
    # goes with the folder. The merged file is moved into place only once every row was read here: the child may
    # finish first.
    with tempfile.TemporaryDirectory(
        prefix=".reverify-merge-", dir=None if merged is None else merged.parent, ignore_cleanup_errors=True
    ) as folder:
        index_file, staged = Path(folder) / "index.parquet", Path(folder) / "merged.jsonl"
        index.write_parquet(index_file)
        target = NO_MERGED_FILE if merged is None else str(staged)
        arguments = ["shards", str(index_file), target, *map(str, shards)]
        if not (yield from _rows_from_child(arguments, f"{len(shards)} shard(s)", None)):
            yield from _rows_of_shards_in_process(index, shards, merged)
            return
        if merged is not None:
            os.replace(staged, merged)


def _rows_from_child(arguments: list[str], source: str, path: Path | None) -> Generator[dict[str, Any], None, bool]:
    """The child's rows; returns False, having given none, if the child could not be started. ``source`` names
    what it reads in an error; ``path``: the file it reads, if one."""
    with tempfile.TemporaryFile() as errors:
        read_end, write_end = os.pipe()
        with open(read_end, "rb", buffering=0) as pipe:
            try:
                process = _start(arguments, write_end, errors)
            finally:
                os.close(write_end)  # the child's now: the pipe ends when the child closes it
            if process is None:
                return False
            try:
                yield from _parsed_lines(pipe)
                code = process.wait()
            finally:
                # A child still writing gets EPIPE at its next row: it removes its temporary merged file and exits.
                pipe.close()
                _stop(process)
        if code != 0:
            raise _failure(code, errors, source, path)
    return True


def _start(arguments: list[str], stdout: int, errors: IO[bytes]) -> subprocess.Popen[bytes] | None:
    _widen(stdout)
    try:
        # A session of its own: a Ctrl-C meant for the CLI does not print the child's traceback; closing the pipe
        # stops it.
        return subprocess.Popen(
            module_command(child.__name__, *arguments),
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=errors,
            start_new_session=True,
            env=child_environment(),
        )
    except OSError:
        return None


def _widen(pipe: int) -> None:
    """Room in the pipe for many of the child's writes: with Linux's default 64 KiB, the child waited on each write
    until the reader had taken it all, and the two took turns instead of working at once."""
    set_size = getattr(fcntl, "F_SETPIPE_SZ", None)  # Linux only
    if set_size is None:
        return
    try:
        fcntl.fcntl(pipe, set_size, PIPE_BYTES)
    except OSError:  # above the system's limit (/proc/sys/fs/pipe-max-size) for this user: the default it is
        pass


def _stop(process: subprocess.Popen[bytes]) -> None:
    try:
        process.wait(timeout=STOP_WAIT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _parsed_lines(pipe: IO[bytes]) -> Rows:
    loads = orjson.loads
    rest = b""
    while chunk := pipe.read(READ_BYTES):
        lines = (rest + chunk).split(b"\n")
        rest = lines.pop()
        for line in lines:
            yield loads(line)


def _failure(code: int, errors: IO[bytes], source: str, path: Path | None) -> ReverifyError:
    """``path``: the file the child read, when it read one."""
    errors.seek(0)
    # As the child wrote it: a file name that is not UTF-8 reads as in-process.
    said = errors.read().decode(errors="surrogateescape").strip()
    if code == BAD_ROW_EXIT:
        # The in-process reader's error, class, message and fields; or its message, if it gave no more.
        return child.raised_error(said) or InputError(said, path=path)
    how = f"was killed by {signal.Signals(-code).name}" if code < 0 else f"exited with {code}"
    last = said.splitlines()[-1] if said else "nothing on stderr"
    return InputError(f"the process reading the rows of {source} for the aggregate {how}: {last}", path=path)
