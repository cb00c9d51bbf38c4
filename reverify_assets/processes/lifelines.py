"""Children that end with their parent, however the parent ends.

A child's lifeline is the pipe on its stdin, whose writing end its parent alone holds. The pipe hangs up when the
parent closes that end or dies, even by SIGKILL. ``exit_with_parent`` watches for the hang-up in a thread, and then
ends the child at once, whatever it is doing: a child started to serve or to scan for its parent has nobody to do
it for any more. The watch reads nothing, so the parent may still hand the child its orders on the same pipe.

A child that cannot watch a pipe (a Dagster run's worker) asks the kernel instead (``die_with_parent``, Linux only):
a parent killed with SIGKILL runs no clean-up, and without it a worker busy re-scoring a shard kept running, and
holding its verifier servers, for as long as its shard took.
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import sys
import threading
from collections.abc import Callable


def exit_with_parent(clean_up: Callable[[], None] | None = None, *, status: int = 0) -> None:
    """From now on, when stdin hangs up: ``clean_up()``, then exit with ``status``."""

    def watch() -> None:
        poller = select.poll()
        poller.register(sys.stdin.fileno(), 0)  # no event asked for: only a hang-up (or an error) is reported
        poller.poll()
        if clean_up is not None:
            clean_up()
        os._exit(status)

    threading.Thread(target=watch, name="lifeline", daemon=True).start()


_PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int | None = None, signum: int = signal.SIGKILL) -> None:
    """Call in the child; ``parent``: the pid it was started by, in case that one died before the call."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signum)
    except (AttributeError, OSError):  # not Linux: the child outlives a killed parent, as it did before
        return
    if parent is not None and os.getppid() != parent:
        os.kill(os.getpid(), signum)
