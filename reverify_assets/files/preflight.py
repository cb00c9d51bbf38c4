"""The files a run reads and writes, checked before anything starts, naming them: a source must be a regular file
this process can read, and no file the run writes may be one of its sources (through links too)."""

from __future__ import annotations

import os
import stat
from collections.abc import Collection, Mapping
from pathlib import Path

from reverify_assets.errors import InputError, OutputError

# Anything else is read once and gone (a FIFO, a socket) or is no file of rows (a directory, a device);
# every source is read more than once (indexed, then its rows read back by offset).
_KINDS = {
    stat.S_IFDIR: "a directory",
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
}


def check_source_file(flag: str, path: Path) -> None:
    try:
        info = os.stat(path)
    except FileNotFoundError:
        if path.is_symlink():
            raise InputError(
                f"{flag} file not found: {path} is a symbolic link to {os.readlink(path)}", path=path
            ) from None
        raise InputError(f"{flag} file not found: {path}", path=path) from None
    except OSError as exc:  # a symbolic link loop, a folder on the way that cannot be searched
        raise InputError(f"{flag} file {path} cannot be read: {exc.strerror}", path=path) from exc
    if not stat.S_ISREG(info.st_mode):
        kind = _KINDS.get(stat.S_IFMT(info.st_mode), "not a regular file")
        raise InputError(
            f"{flag} {path} is {kind}: reverify reads its sources as regular files, more than once", path=path
        )
    try:
        with open(path, "rb") as fh:
            fh.read(1)
    except OSError as exc:
        raise InputError(f"{flag} file {path} cannot be read: {exc.strerror}", path=path) from exc


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
                raise OutputError(
                    f"{role} {path} is the same file as {source_role} {source}: the run would write over one of "
                    "its own sources. Choose another --output.",
                    path=path,
                )
