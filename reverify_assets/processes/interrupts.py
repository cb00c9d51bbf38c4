"""Ctrl-C (SIGINT), SIGTERM and SIGHUP: each stops a command as KeyboardInterrupt, and the exit status says which.

A run stopped any of these ways unwinds the same way (its children stopped, its files whole, its state
resumable); the status is 128 + the signal's number, as a shell reports a process the signal killed. During a
Dagster run, Dagster's own handler takes SIGINT and SIGTERM and raises its own exception, which says neither;
so every signal Python handles is also noted by its C-level handler, which writes the signal's number to a pipe
(``signal.set_wakeup_fd``), read here when the command asks what stopped it.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

# SIGHUP: the terminal closed. Its default would kill the command outright, its children left to themselves.
INTERRUPTS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_noted: list[int] = []
_pipe: list[int] = []  # the wakeup pipe's read and write ends, once installed
_handled: list[int] = []  # the signals install() took


def install() -> None:
    """In the main thread, before anything starts: SIGTERM raises KeyboardInterrupt as Ctrl-C does (unless
    ignored, as a shell's background job ignores Ctrl-C), and every signal from now on is noted."""
    if not _pipe:
        _pipe.extend(os.pipe())
        for end in _pipe:
            os.set_blocking(end, False)  # the C handler must never wait on a full pipe; it drops the byte instead
    watch_again()
    _handled[:] = [signum for signum in INTERRUPTS if signal.getsignal(signum) is not signal.SIG_IGN]
    reinstate()


def reinstate() -> None:
    """Our handlers again, after an in-process Dagster run: when one ends, Dagster sets SIGTERM to SIGINT's handler,
    which in a shell's background job is 'ignored' (a backfill then ignored SIGTERM from its second shard on)."""
    for signum in _handled:
        signal.signal(signum, _interrupt)


def ignore() -> None:
    """Ignore both signals from now on."""
    for signum in INTERRUPTS:
        signal.signal(signum, signal.SIG_IGN)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def watch_again() -> None:
    """Note signals again, after an asyncio loop that took the wakeup pipe for its own signal handlers let go."""
    if _pipe:
        signal.set_wakeup_fd(_pipe[1], warn_on_full_buffer=False)


def note(signum: int) -> None:
    """Note ``signum``, taken by a handler while the wakeup pipe was another's (an asyncio loop's)."""
    _drain()
    _noted.append(signum)


def received() -> int | None:
    """The first Ctrl-C or SIGTERM this process received, if any."""
    _drain()
    return next(iter(_noted), None)


def exit_status(signum: int) -> int:
    return 128 + signum


def _drain() -> None:
    if not _pipe:
        return
    while True:
        try:
            taken = os.read(_pipe[0], 512)
        except BlockingIOError:
            return
        _noted.extend(signum for signum in taken if signum in INTERRUPTS)


@contextmanager
def children_deaf_to_ctrl_c() -> Iterator[None]:
    """Processes started by this thread meanwhile have Ctrl-C blocked for good: a signal mask is inherited
    through fork and exec, and Python leaves it as it finds it. For processes started by code we cannot tell to
    start them in a process group of their own (a terminal sends Ctrl-C to its foreground group, all of it).
    This process loses no Ctrl-C: one that comes meanwhile is taken by another thread, or waits for the block's end.
    """
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


@contextmanager
def deferred() -> Iterator[None]:
    """In the main thread: Ctrl-C, SIGTERM and SIGHUP held until the block ends, then raised as KeyboardInterrupt
    as they would have been. For a few statements that must not be cut in half (a process started and not yet
    recorded)."""
    held: list[int] = []
    previous = {signum: signal.getsignal(signum) for signum in _handled}
    for signum in _handled:
        signal.signal(signum, lambda taken, _frame: held.append(taken))
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if held:
            raise KeyboardInterrupt
