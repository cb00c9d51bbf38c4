"""A key scan (``key_columns``) in a process of its own, for ``reverify run``'s start-up.

In a thread of the CLI the scan would hold the GIL against Dagster's import, which is most of the start-up,
and both would finish later. In its own process it runs beside the import; inputs and rollouts each get one,
at the CLI's priority (niced, they made the first request no sooner and a bad file's error 0.8 s later).
The process writes its columns to a file and exits; ``ScanProcess.columns()`` reads them back. A file the
exact scan must judge comes back as None, as from ``scan_key_columns`` itself; a process that failed in any
other way is the caller's cue to scan in-process instead.

    python -m reverify_assets.lib.key_scan_process {inputs|rollouts} FILE LIMIT|- OUTPUT
"""

from __future__ import annotations

import os
import subprocess
import sys
from array import array
from pathlib import Path
from typing import BinaryIO

import orjson

from reverify_assets.lib.key_columns import KeyColumns, scan_key_columns

KINDS = ("inputs", "rollouts")


class ScanFailed(Exception):
    """The scan process ended without its answer (killed, or a fault of ours): scan in-process instead."""


class ScanProcess:
    """A started scan of ``path``: the inputs' keys and routes, or the rollouts' keys (a response required)."""

    def __init__(self, kind: str, path: Path, limit: int | None, output: Path) -> None:
        self.output = output
        command = [sys.executable, "-m", __name__, kind, str(path), "-" if limit is None else str(limit), str(output)]
        self._process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)

    def columns(self) -> KeyColumns | None:
        """Wait for the scan; its columns, or None for a file the exact scan must judge. Raises ScanFailed."""
        if self._process.wait() != 0:
            raise ScanFailed(f"the key scan process exited with {self._process.returncode}")
        try:
            return read_columns(self.output)
        except (OSError, ValueError, EOFError, KeyError) as exc:
            raise ScanFailed(f"cannot read the key scan's answer {self.output}: {exc}") from exc

    def stop(self) -> None:
        if self._process.poll() is None:
            self._process.kill()
            self._process.wait()


def write_columns(columns: KeyColumns | None, output: Path) -> None:
    """A header line (rows, routes; or ``{"exact": true}``), then the columns' bytes; under a temporary name
    until whole."""
    if columns is None:
        header: dict[str, object] = {"exact": True}
    else:
        header = {"rows": columns.rows, "routes": columns.routes}
    temporary = output.with_name(output.name + ".part")
    with open(temporary, "wb") as fh:
        fh.write(orjson.dumps(header) + b"\n")
        if columns is not None:
            for values in (columns.tasks, columns.rollouts, columns.offsets, columns.route_of_row):
                if values is not None:
                    values.tofile(fh)
    os.replace(temporary, output)


def read_columns(path: Path) -> KeyColumns | None:
    with open(path, "rb") as fh:
        header = orjson.loads(fh.readline())
        if header.get("exact"):
            return None
        rows, routes = header["rows"], header["routes"]
        tasks, rollouts, offsets = _read(fh, "q", rows), _read(fh, "q", rows), _read(fh, "q", rows)
        route_of_row = None if routes is None else _read(fh, "i", rows)
        if fh.read(1):
            raise ValueError("more bytes than its rows")
    return KeyColumns(tasks, rollouts, offsets, route_of_row, routes)


def _read(fh: BinaryIO, typecode: str, rows: int) -> array[int]:
    values: array[int] = array(typecode)
    values.fromfile(fh, rows)  # EOFError if the file is short
    return values


def main(argv: list[str]) -> int:
    kind, path, limit, output = argv
    if kind not in KINDS:
        raise SystemExit(f"kind must be one of {KINDS}, not {kind!r}")
    columns = scan_key_columns(
        Path(path),
        with_routes=kind == "inputs",
        require_response=kind == "rollouts",
        limit=None if limit == "-" else int(limit),
    )
    write_columns(columns, Path(output))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
