"""A child process's lifeline: the pipe on its stdin, whose writing end its parent alone holds.

The pipe hangs up when the parent closes that end or dies, even by SIGKILL. ``exit_with_parent`` watches for the
hang-up in a thread, and then ends the child at once, whatever it is doing: a child started to serve or to scan
for its parent has nobody to do it for any more. The watch reads nothing, so the parent may still hand the child
its orders on the same pipe.
"""

from __future__ import annotations

import os
import select
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
