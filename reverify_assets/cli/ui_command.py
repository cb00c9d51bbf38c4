"""``reverify ui``: ``dagster dev`` on the CLI's DAGSTER_HOME, stopped with every process it started.

``dagster dev`` runs in a process group of its own, so that Ctrl-C and SIGTERM are this command's to relay: a
terminal sends Ctrl-C to its whole foreground group, and Dagster's webserver, daemon and code servers, each
interrupted on its own while ``dagster dev`` was telling them to stop, left some of them running. Relayed, the
Ctrl-C reaches ``dagster dev`` alone, which stops the others (about 2 s); what is left of its group after
``STOP_S`` seconds, or after a second Ctrl-C, is killed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from reverify_assets.errors import ReverifyError

STOP_S = 8.0
# `dagster dev`'s own exit statuses for a stop: 0 after its clean shutdown, or killed by the Ctrl-C.
STOPPED = (0, -signal.SIGINT, 128 + signal.SIGINT)


def ui_command(project: Path, port: int) -> None:
    from reverify_assets.defs.instance import ensure_dagster_home

    workspace = project / "workspace.yaml"
    if not workspace.is_file():
        raise ReverifyError(f"no workspace.yaml in {project.resolve()} (pass --project)")
    home = ensure_dagster_home()
    dagster = Path(sys.executable).with_name("dagster")
    print(f"Dagster UI for DAGSTER_HOME={home}: http://127.0.0.1:{port}", flush=True)
    command = [str(dagster), "dev", "-w", str(workspace), "-h", "127.0.0.1", "-p", str(port)]
    # No stdin: a process group other than the terminal's foreground one is stopped if it reads the terminal.
    dev = subprocess.Popen(command, cwd=project, stdin=subprocess.DEVNULL, process_group=0)
    try:
        returncode = dev.wait()
    except KeyboardInterrupt:
        _stop(dev)
        raise
    finally:
        _kill_group(dev.pid)  # what it left running, however it ended
    if returncode not in STOPPED:
        raise ReverifyError(f"dagster dev exited with status {returncode}")


def _stop(dev: subprocess.Popen[bytes]) -> None:
    """Ctrl-C to ``dagster dev``, which stops what it started; at most ``STOP_S`` seconds, or until another Ctrl-C."""
    try:
        dev.send_signal(signal.SIGINT)
        dev.wait(timeout=STOP_S)
    except (subprocess.TimeoutExpired, KeyboardInterrupt):
        pass


def _kill_group(group: int) -> None:
    try:
        os.killpg(group, signal.SIGKILL)
    except ProcessLookupError:  # nothing of it is left
        pass
