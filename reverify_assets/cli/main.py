"""The ``reverify`` command line: its parser, the table of its commands, and NeMo Gym's exit codes.

Each command (``COMMANDS``) is a function ``(args, overrides)`` in a module of this package, imported only when the
command runs, and a pydantic model of its flags, from which its parser is derived (``cli.flags``): a usage error,
or ``reverify --help``, answers before polars and Dagster are imported.
"""

from __future__ import annotations

import argparse
import atexit
import ctypes
import logging
import os
import signal
import sys
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import import_module
from typing import Any

from reverify_assets.cli.stdout_pipe import ReaderMayLeave
from reverify_assets.errors import ReverifyError, UsageError
from reverify_assets.processes import interrupts
from reverify_assets.processes import secrets as process_secrets

log = logging.getLogger("reverify")
_CLI = "reverify_assets.cli"


@dataclass(frozen=True)
class Command:
    """A command: its line of help, the function that runs it (``module:function``, called with the parsed
    arguments and the overrides), and the model its flags are declared in (``module:Model``, ``cli.flags``)."""

    help: str
    runs: str
    flags: str
    only: tuple[str, ...] | None = None  # the model's fields that are this command's flags, when not all of them


# In the order `reverify --help` lists them.
COMMANDS: dict[str, Command] = {
    "run": Command(
        "re-verify rollouts (a Dagster materialization)",
        f"{_CLI}.run_command:run_command",
        "reverify_assets.run.options:RunOptions",
    ),
    "aggregate": Command(
        "merge shard outputs and compute their aggregate metrics",
        f"{_CLI}.aggregate_command:aggregate_command",
        "reverify_assets.run.options:AggregateOptions",
    ),
    "serve": Command(
        "run the configured built-in resources servers in the foreground",
        f"{_CLI}.serve_command:serve_command",
        "reverify_assets.run.options:RunOptions",
        only=("config_paths", "no_judge_cache"),
    ),
    "judge-serve": Command(
        "run the local judge model for the equivalence_judge server (demo and tests)",
        f"{_CLI}.judge_serve_command:judge_serve_command",
        f"{_CLI}.judge_serve_command:JudgeServeOptions",
    ),
    "shards": Command(
        "find the shards of a rescoring's rollout files and register them",
        f"{_CLI}.rescoring_commands:shards_command",
        f"{_CLI}.rescoring_commands:RescoringFlags",
    ),
    "status": Command(
        "list shards materialized, stale (verifier changed), failed and missing",
        f"{_CLI}.rescoring_commands:status_command",
        f"{_CLI}.rescoring_commands:RescoringFlags",
    ),
    "backfill": Command(
        "re-score shards, one run each, then the aggregate",
        f"{_CLI}.rescoring_commands:backfill_command",
        f"{_CLI}.rescoring_commands:BackfillOptions",
    ),
    "ui": Command(
        "start the Dagster UI on the CLI's DAGSTER_HOME",
        f"{_CLI}.rescoring_commands:ui_command",
        f"{_CLI}.rescoring_commands:UiOptions",
    ),
    "compare": Command(
        "compare two scorings of the same rollouts, row by row",
        f"{_CLI}.compare_command:compare_command",
        f"{_CLI}.compare_command:CompareOptions",
    ),
    "noise": Command(
        "score a sample of the rollouts K times with one config: its flip rate and Fleiss' κ",
        f"{_CLI}.noise_command:noise_command",
        f"{_CLI}.noise_command:NoiseOptions",
    ),
    "probe": Command(
        "score a sample twice on fresh servers: is re-scoring with this config sound?",
        f"{_CLI}.probe_command:probe_command",
        f"{_CLI}.probe_command:ProbeOptions",
    ),
}
# polars' allocator (jemalloc) keeps freed pages for a while by default, per arena: the key scans of a
# million rows (then in this process) left about 80 MB more resident at their peak, and for the rest of the run. Read by
# jemalloc when polars is first loaded, so set before any command imports it.
POLARS_ALLOCATOR_VARIABLE = "_RJEM_MALLOC_CONF"
POLARS_ALLOCATOR_CONFIG = "dirty_decay_ms:0,muzzy_decay_ms:0"
# What `import polars` writes into that variable, ahead of any options already there: a Python parent that
# imported polars (a script, a test, a benchmark) hands it down to us, and would otherwise override ours.
POLARS_DEFAULT_OPTIONS = ["dirty_decay_ms:500", "muzzy_decay_ms:1000"]
# glibc's malloc raises its mmap threshold to the size of each large block it frees (up to 32 MiB), so later
# blocks of that size come from the heap, which keeps them once freed: after the key scans of a million rows
# (then in this process) about 60 MB stayed resident for the rest of the run. Setting the threshold fixes it
# where it starts.
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 1 << 20


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}")


def build_parser() -> argparse.ArgumentParser:
    from reverify_assets.cli.flags import add_flags

    parser = _Parser(prog="reverify", description="Re-score stored NeMo Gym rollouts with a changed verifier.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name, command in COMMANDS.items():
        add_flags(commands.add_parser(name, help=command.help), resolve(command.flags), only=command.only)
    return parser


def resolve(reference: str) -> Any:
    """The object a ``module:name`` reference of the table names."""
    module, _, name = reference.partition(":")
    return getattr(import_module(module), name)


def parse(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    """Hydra-style ``++key=value`` tokens may stand anywhere; they are overrides, not flags."""
    from reverify_assets.config.loading import is_override

    overrides = [token for token in argv if is_override(token)]
    args = build_parser().parse_args([token for token in argv if not is_override(token)])
    return args, overrides


def _configure_output() -> None:
    """Our progress lines on stderr; the libraries' own INFO chatter (alembic, Dagster betas) stays out."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
    warnings.filterwarnings("ignore", message=r".*is currently in beta")


def _fix_mmap_threshold() -> None:
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the C library this process runs on
    except (OSError, AttributeError):  # not glibc (macOS): nothing to fix
        return
    mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)


def polars_allocator_config(inherited: str | None) -> str:
    """Our options, then those the environment adds beyond polars' defaults: jemalloc takes the last value of
    each option, so a user's own choice still wins, unless it is exactly polars' defaults, which cannot be told
    from what a parent's `import polars` wrote."""
    options = [option for option in (inherited or "").split(",") if option]
    while options[: len(POLARS_DEFAULT_OPTIONS)] == POLARS_DEFAULT_OPTIONS:
        del options[: len(POLARS_DEFAULT_OPTIONS)]
    return ",".join([POLARS_ALLOCATOR_CONFIG, *options])


def main(argv: Sequence[str] | None = None) -> int:
    os.environ[POLARS_ALLOCATOR_VARIABLE] = polars_allocator_config(os.environ.get(POLARS_ALLOCATOR_VARIABLE))
    _fix_mmap_threshold()
    _configure_output()
    try:
        args, overrides = parse(sys.argv[1:] if argv is None else argv)
        resolve(COMMANDS[args.command].runs)(args, overrides)
    except KeyboardInterrupt:
        return _interrupted(interrupts.received() or signal.SIGINT)
    except Exception as exc:
        # What stopping made fail is no error of its own: a server killed by the same Ctrl-C, a step Dagster
        # stopped. The signal is the cause.
        if (signum := interrupts.received()) is not None:
            return _interrupted(signum)
        if isinstance(exc, OSError):  # the file system's word (it names the file when it knows it), not a bug
            print(f"reverify: error: {process_secrets.redact(str(exc))}", file=sys.stderr)
            return ReverifyError.exit_code
        if not isinstance(exc, ReverifyError):
            raise
        print(f"reverify: error: {process_secrets.redact(str(exc))}", file=sys.stderr)
        return exc.exit_code
    return 0


def _interrupted(signum: int) -> int:
    said = "" if signum == signal.SIGINT else f" ({signal.Signals(signum).name})"
    print(f"reverify: interrupted{said}", file=sys.stderr)
    return interrupts.exit_status(signum)


def entry() -> None:
    """The ``reverify`` command: ``main`` with SIGTERM taken as Ctrl-C, then an exit that skips the interpreter's
    teardown.

    When ``main`` returns, every file is closed and every server stopped, and the exit handlers still run
    (file locks, temporary files); what is skipped is CPython freeing the objects of Dagster, polars and the
    run one by one, which kept the user waiting about half a second after a 20,000-row run.
    """
    interrupts.install()
    exit_code: list[int] = []
    atexit.register(_exit_now, exit_code)  # registered first, so it runs after every other exit handler
    if sys.stdout is not None:  # None when started with standard output closed: print then writes nothing
        sys.stdout = ReaderMayLeave(sys.stdout)  # type: ignore[assignment]
    exit_code.append(main())
    interrupts.ignore()  # what is left is the exit handlers' clean-up, which a late Ctrl-C must not break off
    sys.exit(exit_code[0])


def _exit_now(exit_code: list[int]) -> None:
    if not exit_code:  # main raised: Python reports it and exits as usual
        return
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        if stream is None:  # started with that descriptor closed
            continue
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: nothing more can reach it
            pass
    os._exit(exit_code[0])


if __name__ == "__main__":
    entry()
