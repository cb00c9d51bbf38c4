"""The command table: every command the parser knows runs a function of its own, and none is run by default."""

from __future__ import annotations

import argparse
import inspect

import pytest
from pydantic import BaseModel

from reverify_assets.cli.main import COMMANDS, build_parser, main, resolve


def parser_commands() -> list[str]:
    subparsers = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return list(subparsers.choices)


def test_the_table_and_the_parser_name_the_same_commands_in_the_same_order() -> None:
    assert list(COMMANDS) == parser_commands()


@pytest.mark.parametrize("command", list(COMMANDS))
def test_each_command_is_a_function_of_args_and_overrides(command: str) -> None:
    handler = resolve(COMMANDS[command].runs)
    assert list(inspect.signature(handler).parameters) == ["args", "overrides"]


@pytest.mark.parametrize("command", list(COMMANDS))
def test_each_command_declares_its_flags_in_a_model(command: str) -> None:
    model = resolve(COMMANDS[command].flags)
    assert issubclass(model, BaseModel)
    assert set(COMMANDS[command].only or ()) <= set(model.model_fields)


@pytest.mark.parametrize("command", ["shards", "status", "backfill", "ui"])
def test_an_override_given_to_a_rescoring_command_is_refused(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [command] if command == "ui" else [command, "mcqa_sample"]
    assert main([*argv, "++mcqa.resources_servers.mcqa.grading_mode=strict"]) == 2
    err = capsys.readouterr().err
    assert f"reverify {command} takes no ++overrides" in err and "configs/rescorings/" in err
