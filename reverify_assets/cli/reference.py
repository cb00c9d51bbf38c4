"""``docs/cli.md``, the command-line reference, generated from the parser itself so that it cannot drift from it.

    .venv/bin/python -m reverify_assets.cli.reference          # rewrite docs/cli.md
    .venv/bin/python -m reverify_assets.cli.reference --check  # exit 1 if docs/cli.md is stale

``tests/unit/test_cli_reference.py`` fails when the file and the parser disagree.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from reverify_assets.cli.main import build_parser
from reverify_assets.files.atomic import write_bytes_atomic

REFERENCE = Path(__file__).resolve().parents[2] / "docs" / "cli.md"
REGENERATE = ".venv/bin/python -m reverify_assets.cli.reference"


def render(parser: argparse.ArgumentParser) -> str:
    """The reference page: each command, what it does, and a row per option."""
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    summaries = {choice.dest: choice.help or "" for choice in commands._choices_actions}
    lines = [
        "# Command-line reference",
        "",
        f"Generated from the parser by `{REGENERATE}`; a test fails when it is stale. "
        "Exit codes: 0 success, 1 a config, data or runtime error, 2 usage, 128 + the signal's number when "
        "stopped (130 Ctrl-C, 143 SIGTERM, 129 a closed terminal).",
        "",
        "| command | what it does |",
        "| --- | --- |",
        *(f"| [`reverify {name}`](#reverify-{name}) | {_cell(summaries.get(name, ''))} |" for name in commands.choices),
    ]
    for name, command in commands.choices.items():
        lines += ["", f"## reverify {name}", "", _cell(summaries.get(name, "")), "", *_options(command)]
    return "\n".join(lines) + "\n"


def _options(command: argparse.ArgumentParser) -> list[str]:
    rows = ["| argument | value | default | what it is |", "| --- | --- | --- | --- |"]
    for action in command._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        names = ", ".join(f"`{name}`" for name in action.option_strings) or f"`{action.dest}`"
        rows.append(f"| {names} | {_value(action)} | {_default(action)} | {_cell(action.help or '')} |")
    return rows


def _value(action: argparse.Action) -> str:
    if action.nargs == 0:
        return "flag"
    if action.choices:
        return " \\| ".join(f"`{choice}`" for choice in action.choices)
    shown = action.metavar or (action.type.__name__ if isinstance(action.type, type) else "text")
    repeat = " (repeatable)" if isinstance(action, argparse._AppendAction) else ""
    return f"{shown}{repeat}"


def _default(action: argparse.Action) -> str:
    if action.required:
        return "required"
    if action.nargs == 0 or action.default in (None, argparse.SUPPRESS):
        return ""
    return f"`{action.default}`"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def main(argv: list[str]) -> int:
    page = render(build_parser())
    if argv == ["--check"]:
        if REFERENCE.is_file() and REFERENCE.read_text(encoding="utf-8") == page:
            return 0
        print(f"{REFERENCE} is stale: regenerate it with {REGENERATE}", file=sys.stderr)
        return 1
    write_bytes_atomic(REFERENCE, page.encode())
    print(f"wrote {REFERENCE}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
