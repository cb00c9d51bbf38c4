"""The command table: every command the parser knows runs a function of its own, and none is run by default."""

from __future__ import annotations

import argparse
import inspect
from importlib import import_module

import pytest

from reverify_assets.cli.main import COMMANDS, build_parser, main


def parser_commands() -> list[str]:
    subparsers = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return list(subparsers.choices)


def test_the_table_and_the_parser_name_the_same_commands_in_the_same_order() -> None:
    assert list(COMMANDS) == parser_commands()


@pytest.mark.parametrize("command", list(COMMANDS))
def test_each_command_is_a_function_of_args_and_overrides(command: str) -> None:
    module, name = COMMANDS[command]
    handler = getattr(import_module(module), name)
    assert list(inspect.signature(handler).parameters) == ["args", "overrides"]


@pytest.mark.parametrize("command", ["shards", "status", "backfill", "ui"])
def test_an_override_given_to_a_rescoring_command_is_refused(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [command] if command == "ui" else [command, "mcqa_sample"]
    assert main([*argv, "++mcqa.resources_servers.mcqa.grading_mode=strict"]) == 2
    err = capsys.readouterr().err
    assert f"reverify {command} takes no ++overrides" in err and "configs/rescorings/" in err
