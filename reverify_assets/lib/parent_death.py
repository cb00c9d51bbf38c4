"""A child process that the kernel stops when its parent dies, however the parent dies (Linux only).

A parent killed with SIGKILL runs no clean-up: without this, a worker busy re-scoring a shard kept running,
and holding its verifier servers, for as long as its shard took.
"""

from __future__ import annotations

import ctypes
import os
import signal

_PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int | None = None, signum: int = signal.SIGKILL) -> None:
    """Call in the child; ``parent``: the pid it was started by, in case that one died before the call."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signum)
    except (AttributeError, OSError):  # not Linux: the child outlives a killed parent, as it did before
        return
    if parent is not None and os.getppid() != parent:
        os.kill(os.getpid(), signum)
