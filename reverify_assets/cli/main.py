"""The ``reverify`` command line: its parser, the table of its commands, and NeMo Gym's exit codes.

Each command is a function ``(args, overrides)`` in a module of this package (``COMMANDS``), imported only when
the command runs: a usage error, or ``reverify --help``, answers before polars and Dagster are imported.
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
from importlib import import_module
from typing import TYPE_CHECKING, Any, get_origin

from reverify_assets.cli.stdout_pipe import ReaderMayLeave
from reverify_assets.errors import ReverifyError, UsageError
from reverify_assets.processes import interrupts
from reverify_assets.processes import secrets as process_secrets

if TYPE_CHECKING:  # an annotation only: the parser loads pydantic with the declarations it reads (run.options)
    from pydantic import BaseModel

log = logging.getLogger("reverify")
_CLI = "reverify_assets.cli"
# Command name -> (module, function), in the order `reverify --help` lists them.
COMMANDS: dict[str, tuple[str, str]] = {
    "run": (f"{_CLI}.run_command", "run_command"),
    "aggregate": (f"{_CLI}.aggregate_command", "aggregate_command"),
    "serve": (f"{_CLI}.serve_command", "serve_command"),
    "judge-serve": (f"{_CLI}.judge_serve_command", "judge_serve_command"),
    "shards": (f"{_CLI}.rescoring_commands", "shards_command"),
    "status": (f"{_CLI}.rescoring_commands", "status_command"),
    "backfill": (f"{_CLI}.rescoring_commands", "backfill_command"),
    "ui": (f"{_CLI}.rescoring_commands", "ui_command"),
    "compare": (f"{_CLI}.compare_command", "compare_command"),
    "noise": (f"{_CLI}.noise_command", "noise_command"),
    "probe": (f"{_CLI}.probe_command", "probe_command"),
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
    parser = _Parser(prog="reverify", description="Re-score stored NeMo Gym rollouts with a changed verifier.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    from reverify_assets.run.options import AggregateOptions, RunOptions

    run = commands.add_parser("run", help="re-verify rollouts (a Dagster materialization)")
    add_flags(run, RunOptions)

    aggregate = commands.add_parser("aggregate", help="merge shard outputs and compute their aggregate metrics")
    add_flags(aggregate, AggregateOptions)

    serve = commands.add_parser("serve", help="run the configured built-in resources servers in the foreground")
    add_flags(serve, RunOptions, only=["config_paths", "no_judge_cache"])
    from reverify_assets.cli.judge_serve_command import add_judge_serve_parser

    add_judge_serve_parser(commands)
    from reverify_assets.cli.rescoring_commands import add_rescoring_parsers

    add_rescoring_parsers(commands)
    from reverify_assets.cli.compare_command import add_compare_parser

    add_compare_parser(commands)
    from reverify_assets.cli.noise_command import add_noise_parser

    add_noise_parser(commands)
    from reverify_assets.cli.probe_command import add_probe_parser

    add_probe_parser(commands)
    return parser


def add_flags(command: argparse.ArgumentParser, model: type[BaseModel], only: Sequence[str] | None = None) -> None:
    """One option for each field of ``model`` that has a description (``run.options.flag``), or of those
    named in ``only``: named for the field (or its ``option``), its help the description, its value checked by
    the model when the command builds it."""
    for name, field in model.model_fields.items():
        if field.description is None or (only is not None and name not in only):
            continue
        extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
        names = [
            str(extra.get("option") or f"--{name.replace('_', '-')}"),
            *([str(extra["short"])] if "short" in extra else []),
        ]
        kind = field.annotation
        settings: dict[str, Any] = {"dest": name, "help": field.description}
        if "metavar" in extra:
            settings["metavar"] = extra["metavar"]
        if kind is bool:
            settings["action"] = "store_true"
        elif get_origin(kind) is list:
            settings |= {"action": "append", "required": field.is_required()}
        else:
            number = next((t for t in (int, float) if kind in (t, t | None)), None)
            settings |= {"type": number} if number else {}
            settings |= {"required": True} if field.is_required() else {"default": field.default}
        command.add_argument(*names, **settings)


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
        module, handler = COMMANDS[args.command]
        getattr(import_module(module), handler)(args, overrides)
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
