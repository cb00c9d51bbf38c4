"""Ctrl-C and SIGTERM: which one came (whoever's handler took it), children deaf to Ctrl-C, and the CLI's exit."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

import pytest

from reverify_assets.cli import main as cli
from reverify_assets.errors import ReverifyError
from reverify_assets.processes import interrupts
from reverify_assets.processes.child_python import child_environment
from reverify_assets.processes.interrupts import children_deaf_to_ctrl_c

PIPES = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "text": True}

NOTED_UNDER_ANOTHER_HANDLER = textwrap.dedent(
    """
    import os, signal
    from reverify_assets.processes import interrupts

    interrupts.install()
    taken = []
    # As Dagster does during a run: its own handler for both, which says neither.
    signal.signal(signal.SIGTERM, lambda signum, frame: taken.append("dagster's"))
    os.kill(os.getpid(), signal.SIGTERM)
    assert taken == ["dagster's"]
    print(interrupts.received())
    """
)


def test_a_signal_another_handler_took_is_still_known() -> None:
    done = subprocess.run(
        [sys.executable, "-c", NOTED_UNDER_ANOTHER_HANDLER], capture_output=True, text=True, env=child_environment()
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{int(signal.SIGTERM)}\n"


IN_A_BACKGROUND_JOB = """
import os, signal
from reverify_assets.processes import interrupts

signal.signal(signal.SIGINT, signal.SIG_IGN)  # a shell's background job
interrupts.install()
"""
SIGTERM_NOW = """
try:
    os.kill(os.getpid(), signal.SIGTERM)
except KeyboardInterrupt:
    print("interrupted by", interrupts.received())
"""


def _interrupted_by_sigterm(meanwhile: str) -> None:
    """A background job's process: ``meanwhile``, then a SIGTERM, which must come out as KeyboardInterrupt."""
    script = IN_A_BACKGROUND_JOB + textwrap.dedent(meanwhile) + SIGTERM_NOW
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=child_environment())
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"interrupted by {int(signal.SIGTERM)}\n"


def test_sigterm_raises_keyboard_interrupt_once_installed_and_an_ignored_ctrl_c_stays_ignored() -> None:
    _interrupted_by_sigterm("os.kill(os.getpid(), signal.SIGINT)\n")


def test_children_started_meanwhile_ignore_ctrl_c_and_this_process_still_gets_it() -> None:
    with pytest.raises(KeyboardInterrupt):
        with children_deaf_to_ctrl_c():
            child = subprocess.Popen([sys.executable, "-c", "print('up', flush=True); input()"], **PIPES)
            signal.raise_signal(signal.SIGINT)  # held until the block ends, then raised
    try:
        assert child.stdout is not None and child.stdout.readline() == "up\n"
        child.send_signal(signal.SIGINT)
        child.stdin.write("bye\n")  # type: ignore[union-attr]
        child.stdin.flush()  # type: ignore[union-attr]
        assert child.wait(timeout=30) == 0, "the child took the Ctrl-C"
    finally:
        child.kill()
        child.wait()


@pytest.mark.parametrize(
    ("raised", "received", "status", "said"),
    [
        (KeyboardInterrupt(), None, 130, "reverify: interrupted\n"),
        (KeyboardInterrupt(), signal.SIGTERM, 143, "reverify: interrupted (SIGTERM)\n"),
        # What the signal made fail is not reported as an error of its own.
        (ReverifyError("resources server 'mcqa' exited"), signal.SIGINT, 130, "reverify: interrupted\n"),
        (RuntimeError("Dagster stopped"), signal.SIGTERM, 143, "reverify: interrupted (SIGTERM)\n"),
        (ReverifyError("--inputs file not found: x"), None, 1, "reverify: error: --inputs file not found: x\n"),
    ],
)
def test_the_cli_says_interrupted_whatever_the_signal_made_fail(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    raised: BaseException,
    received: int | None,
    status: int,
    said: str,
) -> None:
    def command(*_: object) -> None:
        raise raised

    monkeypatch.setattr("reverify_assets.cli.serve_command.serve_command", command)
    monkeypatch.setattr(interrupts, "received", lambda: received)
    assert cli.main(["serve", "--config", "x.yaml"]) == status
    assert capsys.readouterr().err == said


def test_an_unexpected_error_without_a_signal_is_not_hidden(monkeypatch: pytest.MonkeyPatch) -> None:
    def command(*_: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr("reverify_assets.cli.serve_command.serve_command", command)
    monkeypatch.setattr(interrupts, "received", lambda: None)
    with pytest.raises(RuntimeError, match="a bug"):
        cli.main(["serve", "--config", "x.yaml"])


def test_sigterm_is_ours_again_after_an_in_process_dagster_run_in_a_background_job() -> None:
    _interrupted_by_sigterm(
        """
        import dagster as dg

        @dg.asset
        def nothing() -> None:
            pass

        try:
            dg.materialize([nothing], instance=dg.DagsterInstance.ephemeral())
        finally:
            interrupts.reinstate()
        """
    )
