"""Runs one server process that lives only while its parent does: the parent's end of our stdin is its lifeline.

NeMo Gym's servers run until they are told to stop, so a parent killed with SIGKILL would leave one behind. This
guard (the standard library and one small module of ours: it starts in milliseconds) reads the command as one JSON
line on stdin, starts it in a session of its own with its output in a log file, and stops its whole process group
when stdin closes (the parent stopped it or died), on SIGTERM, or when the server exits on its own (then with its
exit code). Ctrl-C is the parent's to handle: the launcher starts the guard in a process group of its own, out of
the terminal's reach, and a SIGINT sent to the guard itself is ignored, leaving the server to the parent.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
from functools import partial
from typing import Any

from reverify_assets.processes.lifelines import die_with_parent

STOP_GRACE_S = 5.0
CANNOT_START = 127  # the shell's code for a command it cannot run


def _stop(server: subprocess.Popen[bytes]) -> None:
    _signal_group(server.pid, signal.SIGTERM)
    try:
        server.wait(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        pass
    # Whatever is left of the group: the server if it ignored SIGTERM, and any child it started and left behind.
    _signal_group(server.pid, signal.SIGKILL)
    server.wait()


def _signal_group(group: int, signum: int) -> None:
    try:
        os.killpg(group, signum)
    except ProcessLookupError:
        pass  # nothing of the group is left


def main() -> int:
    spec: dict[str, Any] = json.loads(sys.stdin.buffer.readline())
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    stopping = False

    def stop_on_term(_signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop_on_term)
    with open(spec["log"], "ab") as log:
        try:
            server = subprocess.Popen(
                spec["argv"],
                cwd=spec["cwd"],
                env=spec["env"],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=partial(die_with_parent, os.getpid()),  # the server dies with the guard
            )
        except OSError as exc:  # no such Python, no such folder: said where the launcher looks, the log
            log.write(f"cannot run {spec['argv']} in {spec['cwd']}: {exc}\n".encode())
            return CANNOT_START
    print(f"STARTED {server.pid}", flush=True)
    stdin = sys.stdin.buffer.fileno()
    try:
        while not stopping:
            if server.poll() is not None:
                return server.returncode
            try:
                readable, _, _ = select.select([stdin], [], [], 0.2)
            except InterruptedError:
                continue
            if readable and not os.read(stdin, 4096):
                break  # EOF: the parent closed the pipe or died
    finally:
        _stop(server)
    return 0


if __name__ == "__main__":
    sys.exit(main())
