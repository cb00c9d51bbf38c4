"""A key scan (``key_columns``) in a process of its own, for ``reverify run``'s start-up.

In a thread of the CLI the scan would hold the GIL against Dagster's import, which is most of the start-up,
and both would finish later. In its own process it runs beside the import; the inputs get one, and the rollouts
one or, a big file, one a half (``FilePart``), at the CLI's priority (niced, they made the first request no
sooner and a bad file's error 0.8 s later).
The process writes its columns to a file a block at a time (at a million rows it held 80-90 MB of them
otherwise, beside the CLI at its start-up peak) and exits; ``ScanProcess.columns()`` reads them back. A file the
exact scan must judge comes back as None, as from ``scan_key_columns`` itself; a process that failed in any
other way is the caller's cue to scan in-process instead.

Its stdin is its lifeline (``processes.lifelines``), a pipe from the caller: should the caller die, even by
SIGKILL, the scan removes what nobody will read (SCRATCH, the caller's folder for it, if given; else its own
files) and exits at once, where it used to finish a scan of a big file for no one.

    python -m reverify_assets.keys.scan_process {inputs|rollouts|carried} FILE LIMIT|- OUTPUT PART [SCRATCH]

PART: ``START:END`` (bytes; END empty: to the end), the part of the file to scan (``FilePart``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from array import array
from functools import partial
from pathlib import Path

import orjson

from reverify_assets.keys.key_columns import WHOLE_FILE, ExactScanNeeded, FilePart, KeyColumns, key_column_blocks
from reverify_assets.keys.route_fields import RouteTable
from reverify_assets.processes.child_python import child_environment, module_command
from reverify_assets.processes.lifelines import exit_with_parent

# "carried": rollouts whose rows are carried over as they are (judge recovery's successes): no response needed.
KINDS = ("inputs", "rollouts", "carried")
PROMPTED = ("inputs", "rollouts")  # the two sides of the join, whose prompts it compares (``rollout_identity``)
ORPHANED = 3  # the exit status of a scan whose caller died: nobody reads it
REMOVE_PASSES = 3  # of the scratch folder, when the caller died (see _remove)


class ScanFailed(Exception):
    """The scan process did not start or ended without its answer (a fault of ours): scan in-process instead."""


class ScanStopped(Exception):
    """The scan process was stopped: the start-up is over, and nobody wants the scan any more."""


class ScanProcess:
    """A started scan of ``path``: the inputs' keys and routes, or the rollouts' keys (a response required unless
    the rows are only carried over).

    ``part``: the part of the file to scan (its rows' offsets the file's). ``scratch``: a folder holding
    ``output``, the caller's for this start-up alone, which the scan removes if the caller dies before it is
    done.
    """

    def __init__(
        self,
        kind: str,
        path: Path,
        limit: int | None,
        output: Path,
        *,
        scratch: Path | None = None,
        part: FilePart = WHOLE_FILE,
    ) -> None:
        self.output = output
        self.stopped = False
        part_argument = f"{part.start}:{'' if part.end is None else part.end}"
        arguments = [kind, str(path), "-" if limit is None else str(limit), str(output), part_argument]
        command = module_command(__name__, *arguments, *([] if scratch is None else [str(scratch)]))
        self._process: subprocess.Popen[bytes] | None = None
        self._start_error = ""
        try:
            # A session of its own: a Ctrl-C meant for the CLI does not print the scan's traceback; the CLI
            # stops it on its way out (``stop``). The process is ours: what it would say, the fallback covers.
            self._process = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,  # its lifeline (``processes.lifelines``): never written to
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                env=child_environment(),
            )
        except OSError as exc:
            self._start_error = str(exc)

    def columns(self) -> KeyColumns | None:
        """Wait for the scan (with no time limit: the same scan in-process could take no less); its columns,
        or None for a file the exact scan must judge. Raises ScanFailed, or ScanStopped after ``stop``."""
        if self._process is None:
            raise ScanFailed(f"the key scan process did not start: {self._start_error}")
        returncode = self._process.wait()
        if self.stopped:
            raise ScanStopped
        if returncode != 0:
            raise ScanFailed(f"the key scan process exited with {returncode}")
        try:
            columns = read_columns(self.output)
        except (OSError, ValueError, EOFError, KeyError, TypeError, AttributeError) as exc:
            if self.stopped:  # stopped while reading: the start-up's folder is being removed
                raise ScanStopped from exc
            raise ScanFailed(f"cannot read the key scan's answer {self.output}: {exc}") from exc
        _remove(_files_of(self.output))  # read once: no file is left for a killed caller to leave behind
        return columns

    def stop(self) -> None:
        self.stopped = True
        if self._process is None:
            return
        if self._process.poll() is None:
            self._process.kill()
            self._process.wait()
        if self._process.stdin is not None:
            self._process.stdin.close()


def write_columns(path: Path, kind: str, limit: int | None, output: Path, *, part: FilePart = WHOLE_FILE) -> None:
    """Scan ``path`` and write its columns to ``output`` block by block (the row count, then each column), so
    that this process holds one block's rows at a time; then the summary beside it (see ``summary_of``),
    written last, under a temporary name until whole: ``{"rows", "routes", "prompts"}`` (``prompts``: whether the
    columns hold the rows' prompt fingerprints), or ``{"exact": true}``."""
    routes = RouteTable() if kind == "inputs" else None
    rows = 0
    summary: dict[str, object]
    with open(output, "wb") as fh:
        try:
            blocks = key_column_blocks(
                path,
                routes=routes,
                prompts=kind in PROMPTED,
                require_response=kind == "rollouts",
                limit=limit,
                part=part,
            )
            for block in blocks:
                fh.write(block.rows.to_bytes(8, "little"))
                for values in block.arrays:
                    values.tofile(fh)
                rows += block.rows
            summary = {"rows": rows, "routes": None if routes is None else routes.routes, "prompts": kind in PROMPTED}
        except ExactScanNeeded:
            summary = {"exact": True}
    temporary = _unfinished_summary_of(output)
    temporary.write_bytes(orjson.dumps(summary))
    os.replace(temporary, summary_of(output))


def summary_of(output: Path) -> Path:
    return output.with_name(output.name + ".json")


def _unfinished_summary_of(output: Path) -> Path:
    return output.with_name(output.name + ".json.part")


def read_columns(output: Path) -> KeyColumns | None:
    summary = orjson.loads(summary_of(output).read_bytes())
    if summary.get("exact"):
        return None
    rows, routes = summary["rows"], summary["routes"]
    prompts = array("q") if summary["prompts"] else None
    columns = KeyColumns(array("q"), array("q"), array("q"), prompts, None if routes is None else array("i"), routes)
    with open(output, "rb") as fh:
        while count := fh.read(8):
            block_rows = int.from_bytes(count, "little")
            for values in columns.arrays:
                values.fromfile(fh, block_rows)  # EOFError if the file is short
    if columns.rows != rows:
        raise ValueError(f"{columns.rows} rows where the summary says {rows}")
    return columns


def _files_of(output: Path) -> list[Path]:
    return [output, summary_of(output), _unfinished_summary_of(output)]


def _remove(leftovers: list[Path]) -> None:
    for path in leftovers:
        if path.is_dir():
            # A caller killed as the scan starts: the scan's own thread may create its output in the folder while
            # it is being removed, and the folder stays. Once the folder is gone nothing can be created in it, and
            # the scan creates its output once: a second pass removes what the first missed.
            for _ in range(REMOVE_PASSES):
                shutil.rmtree(path, ignore_errors=True)
                if not path.exists():
                    break
        else:
            path.unlink(missing_ok=True)


def main(argv: list[str]) -> int:
    kind, path, limit, output, part, *scratch = argv
    if kind not in KINDS:
        raise SystemExit(f"kind must be one of {KINDS}, not {kind!r}")
    exit_with_parent(partial(_remove, [Path(folder) for folder in scratch] or _files_of(Path(output))), status=ORPHANED)
    limit_rows = None if limit == "-" else int(limit)
    start, _, end = part.partition(":")
    file_part = FilePart(int(start), int(end) if end else None)
    write_columns(Path(path), kind, limit_rows, Path(output), part=file_part)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
