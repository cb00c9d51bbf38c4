"""The kinds of failure a user can cause or meet, with NeMo Gym's exit codes."""

from __future__ import annotations

import errno
from pathlib import Path

# What a full disk, a quota or a read-only file system answers a write with.
WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS})


class ReverifyError(Exception):
    """A config, data or runtime error: the message names the file, line or key. Exit code 1."""

    exit_code = 1


class UsageError(ReverifyError):
    """A bad flag or an invalid combination of flags. Exit code 2, as argparse does."""

    exit_code = 2


class WriteError(ReverifyError):
    """A file of ours could not be written (a full disk, a read-only folder): the message names it."""

    def __init__(self, path: Path, cause: OSError) -> None:
        super().__init__(f"cannot write {path}: {cause.strerror or cause}")
        self.path = path


class ReadError(ReverifyError):
    """A file could not be read (an I/O error, a file removed under us): the message names it."""

    def __init__(self, path: Path | str, cause: OSError) -> None:
        super().__init__(f"cannot read {path}: {cause.strerror or cause}")
