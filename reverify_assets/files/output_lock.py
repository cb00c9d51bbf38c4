"""One writer per output: two runs on one file would write every pending key twice, or one would delete the
other's rows (``--overwrite``) and then report metrics of a file that holds the other's results.

The lock is ``flock`` on ``.<name>.lock`` beside the output, which the kernel releases when its holder dies,
however it dies; the file names the holder's PID, so that a refused run can say whose it is, and a file left
by a killed run says whose it was. The CLI takes it before anything starts and holds it to the end
(``HeldOutputs.hold``), and hands the Dagster run it makes what it holds: a step of that run writing one of those
outputs works under the command's lock (a second flock on a new descriptor would refuse it); any other run's step
takes the lock itself.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from reverify_assets.errors import OutputError, StateError
from reverify_assets.files.names import lock_path

log = logging.getLogger("reverify")


def lock_file(output: Path) -> Path:
    """Beside the file the output's name leads to: two names of one file (a symbolic link) share one lock."""
    return lock_path(Path(os.path.realpath(output)))


class HeldOutputs:
    """The outputs whose locks a command holds, for the steps of the run it makes (``StartupHandoff``)."""

    def __init__(self) -> None:
        self._locks: set[Path] = set()

    @contextmanager
    def hold(self, output: Path) -> Iterator[None]:
        with exclusive_output(output):
            self._locks.add(lock_file(output))
            try:
                yield
            finally:
                self._locks.discard(lock_file(output))

    def __contains__(self, output: Path) -> bool:
        return lock_file(output) in self._locks


@contextmanager
def exclusive_output(output: Path, held: HeldOutputs | None = None) -> Iterator[None]:
    """Hold the output's lock for the block, unless ``held`` (the command's) holds it already; a run holding it
    is refused at once, naming its PID.

    The lock file is removed on release, and so is the output's folder if the block made it and left it empty:
    a run that stops at a data error leaves nothing behind.
    """
    if held is not None and output in held:
        yield
        return
    path = lock_file(output)
    made_folder = not path.parent.exists()
    fd = _locked(path, output)
    try:
        if (previous := _recorded_pid(fd)) is not None:
            log.warning("NOTICE: taking over %s, left by PID %d, which is no longer running", path, previous)
        _record_pid(fd)
        try:
            yield
        finally:
            path.unlink(missing_ok=True)  # still holding the lock (see _locked); someone may have removed it
    finally:
        os.close(fd)
        if made_folder:
            with suppress(OSError):  # not empty: the run wrote its files there
                path.parent.rmdir()


def _locked(path: Path, output: Path) -> int:
    """A descriptor of the lock file, locked. A holder removes the file before it lets go, so a lock won on a
    file no longer at ``path`` is worth nothing: then the file there now is tried."""
    while True:
        fd = _open(path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _recorded_pid(fd)
            os.close(fd)
            who = f"run with PID {holder}" if holder is not None else "run"
            raise StateError(
                f"another {who} is writing {output} (it holds {path}): wait for it to finish, or stop it first",
                path=output,
            ) from None
        try:
            if os.stat(path).st_ino == os.fstat(fd).st_ino:
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)


def _open(path: Path) -> int:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise OutputError(
            f"cannot write the output's folder {path.parent}: {exc.strerror} ({path})", path=path.parent
        ) from exc


def _recorded_pid(fd: int) -> int | None:
    text = os.pread(fd, 32, 0).decode("ascii", errors="replace").strip()
    return int(text) if text.isdigit() else None


def _record_pid(fd: int) -> None:
    """Best effort: the lock holds without it, and a full disk may refuse even these few bytes."""
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
