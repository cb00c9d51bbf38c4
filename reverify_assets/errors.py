"""What can go wrong that a user caused or meets, by kind, each with its exit code (NeMo Gym's) and the fields its
message names.

The hierarchy::

    ReverifyError                  exit 1: any error the command reports in one line (no traceback)
    ├── UsageError                 exit 2: a bad flag, or flags that do not go together (argparse's code)
    ├── ConfigError                a verifier config, a rescoring file or an environment variable: `key`, `source`
    ├── InputError                 a source file's content: `path`, `line`, `key` (a rollout key)
    │   └── ReadError              a source that cannot be read (an I/O error, a file removed under us): `path`
    ├── OutputError                a file the command writes, or would: `path`
    │   └── WriteError             a write refused by the system (a full disk, a read-only folder): `path`
    ├── ServerError                a server we start or call (a verifier, a judge, a model, the Dagster UI): `server`
    └── StateError                 the state of a run, an output or the Dagster instance: another writer, a
                                   refused resume, mixed verifier configs, a backfill Dagster stopped

A signal is no error: Ctrl-C, SIGTERM or a closed terminal stops the command as a ``KeyboardInterrupt`` (which
Dagster and asyncio know how to unwind), and it exits 128 + the signal's number (``processes.interrupts``).

Every class carries the fields its message names, so that a caller (or a test) asks ``error.path`` rather than
reading the words; ``defs.failures`` shows them as a failed step's metadata in the UI.
"""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any, ClassVar, Self, TypeVar

# What a full disk, a quota or a read-only file system answers a write with.
WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS})
E = TypeVar("E", bound="ReverifyError")


class ReverifyError(Exception):
    """A config, data or runtime error: the message names the file, line or key. Exit code 1."""

    exit_code: ClassVar[int] = 1

    def __init__(
        self,
        message: str,
        *,
        path: Path | str | None = None,
        line: int | None = None,
        key: str | None = None,
    ) -> None:
        super().__init__(message)
        self.path = Path(path) if path is not None else None
        self.line = line
        self.key = key

    def reworded(self, message: str) -> Self:
        """The same error, its class and fields, said another way (a step says where it was when it came)."""
        return _rebuilt(type(self), (message,), vars(self))

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as its class, message and fields: a Dagster step's error crosses processes so, and pickle's way,
        the class called with the message alone, fails for a class that makes its message of other arguments."""
        return (_rebuilt, (type(self), self.args, vars(self)))


def _rebuilt(kind: type[E], args: tuple[Any, ...], fields: dict[str, Any]) -> E:
    error = kind.__new__(kind)
    Exception.__init__(error, *args)
    error.__dict__.update(fields)
    return error


class UsageError(ReverifyError):
    """A bad flag or an invalid combination of flags. Exit code 2, as argparse's."""

    exit_code: ClassVar[int] = 2


class ConfigError(ReverifyError):
    """``key``: the dotted config key (or the variable) at fault; ``source``: the file or override that set it."""

    def __init__(self, message: str, *, key: str | None = None, source: str | None = None) -> None:
        super().__init__(message, key=key)
        self.source = source


class InputError(ReverifyError):
    """A line of a source file (``line`` counts from 1; None: the file as a whole); ``key``: the rollout key."""


class ReadError(InputError):
    def __init__(self, path: Path | str, cause: OSError) -> None:
        super().__init__(f"cannot read {path}: {cause.strerror or cause}", path=path)


class OutputError(ReverifyError):
    """A file the command writes (or would write): taken by another file, in the way, or of the wrong name."""


class WriteError(OutputError):
    def __init__(self, path: Path, cause: OSError) -> None:
        super().__init__(f"cannot write {path}: {cause.strerror or cause}", path=path)


class ServerError(ReverifyError):
    """``server``: the instance name of the server in the config (a judge's model server included), or the
    command that serves (``dagster dev``)."""

    def __init__(self, message: str, *, server: str | None = None, path: Path | str | None = None) -> None:
        super().__init__(message, path=path)
        self.server = server


class StateError(ReverifyError):
    """What is already there forbids it: another run's lock, an output another config began, a refused backfill."""
