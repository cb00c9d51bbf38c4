"""``reverify ui``: ``dagster dev`` on the CLI's DAGSTER_HOME, stopped with every process it started.

``dagster dev`` runs in a process group of its own, out of the terminal's reach; the Ctrl-C or SIGTERM this
command gets is relayed to it as one Ctrl-C, which it answers by stopping its webserver, daemon and code servers
(about 2 s). Whatever of its group is left after ``STOP_S`` seconds, or after a second Ctrl-C, is killed. Once,
a Ctrl-C made ``subprocess.run`` kill ``dagster dev`` outright after a quarter of a second, and a SIGTERM killed
this command: unless a terminal's Ctrl-C had reached them too, the webserver, daemon and code servers kept
running, told nothing.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from functools import partial
from pathlib import Path

from reverify_assets.errors import ConfigError, ServerError, StateError
from reverify_assets.processes.lifelines import die_with_parent

STOP_S = 8.0
# `dagster dev`'s own exit statuses for a stop: 0 after its clean shutdown, or killed by the Ctrl-C.
STOPPED = (0, -signal.SIGINT, 128 + signal.SIGINT)


def start_ui(project: Path, port: int) -> None:
    from reverify_assets.defs.instance import ensure_dagster_home

    workspace = project / "workspace.yaml"
    if not workspace.is_file():
        raise ConfigError(f"no workspace.yaml in {project.resolve()} (pass --project)", source=str(workspace))
    home = ensure_dagster_home()
    _register_ui_output(project)
    dagster = Path(sys.executable).with_name("dagster")
    print(f"Dagster UI for DAGSTER_HOME={home}: http://127.0.0.1:{port}", flush=True)
    command = [str(dagster), "dev", "-w", str(workspace), "-h", "127.0.0.1", "-p", str(port)]
    # No stdin: a process group other than the terminal's foreground one is stopped if it reads the terminal.
    # Out of the terminal's group, it would outlive this command killed outright: the kernel then sends it the
    # Ctrl-C this command would have relayed.
    dies_with_us = partial(die_with_parent, os.getpid(), signal.SIGINT)
    dev = subprocess.Popen(command, cwd=project, stdin=subprocess.DEVNULL, process_group=0, preexec_fn=dies_with_us)
    try:
        returncode = dev.wait()
    except KeyboardInterrupt:
        _stop(dev)
        raise
    finally:
        _kill_group(dev.pid)  # what it left running, however it ended
    if returncode not in STOPPED:
        raise ServerError(f"dagster dev exited with status {returncode}", server="dagster dev")


def _register_ui_output(project: Path) -> None:
    """In a child process: Dagster imported here took over this process's Ctrl-C, and ``dagster dev`` then
    outlived it."""
    register = (
        "import sys; from pathlib import Path; import dagster as dg; "
        "from reverify_assets.defs.project import register_ui_output; "
        "instance = dg.DagsterInstance.get(); register_ui_output(Path(sys.argv[1]), instance)"
    )
    done = subprocess.run([sys.executable, "-c", register, str(project.resolve())], stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise StateError(f"could not register the UI's output partition in {os.environ.get('DAGSTER_HOME')}")


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
