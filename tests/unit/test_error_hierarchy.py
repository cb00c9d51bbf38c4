"""The error classes: their exit codes, their fields, and that they cross processes whole."""

from __future__ import annotations

import copy
import pickle
from pathlib import Path

import pytest

from reverify_assets.errors import (
    ConfigError,
    InputError,
    OutputError,
    ReadError,
    ReverifyError,
    ServerError,
    StateError,
    UsageError,
    WriteError,
)

ERRORS = [
    ReverifyError("plain"),
    UsageError("--limit must be a positive number of rows, got 0"),
    ConfigError("config: `mcqa.resources_servers.mcqa.replicas` is 0", key="mcqa.resources_servers.mcqa.replicas"),
    InputError("r.jsonl:3: not JSON", path="r.jsonl", line=3, key="(task 1, rollout 2)"),
    ReadError(Path("r.jsonl"), OSError(5, "Input/output error")),
    OutputError("o.jsonl exists", path="o.jsonl"),
    WriteError(Path("o.jsonl"), OSError(28, "No space left on device")),
    ServerError("mcqa did not start", server="mcqa"),
    StateError("another run holds o.jsonl", path="o.jsonl"),
]


@pytest.mark.parametrize(
    ("kind", "exit_code"),
    [(ReverifyError, 1), (UsageError, 2), (ConfigError, 1), (InputError, 1), (OutputError, 1), (StateError, 1)],
)
def test_exit_codes(kind: type[ReverifyError], exit_code: int) -> None:
    assert kind.exit_code == exit_code


@pytest.mark.parametrize("error", ERRORS, ids=lambda error: type(error).__name__)
def test_an_error_crosses_a_process_and_a_copy_with_its_class_message_and_fields(error: ReverifyError) -> None:
    for again in (pickle.loads(pickle.dumps(error)), copy.deepcopy(error)):
        assert (type(again), str(again), vars(again)) == (type(error), str(error), vars(error))


@pytest.mark.parametrize("error", ERRORS, ids=lambda error: type(error).__name__)
def test_reworded_keeps_the_class_and_fields(error: ReverifyError) -> None:
    said = error.reworded(f"while comparing: {error}")
    assert (type(said), vars(said), str(said)) == (type(error), vars(error), f"while comparing: {error}")


def test_read_and_write_errors_name_the_file_and_the_cause() -> None:
    assert (str(ERRORS[4]), ERRORS[4].path) == ("cannot read r.jsonl: Input/output error", Path("r.jsonl"))
    assert (str(ERRORS[6]), ERRORS[6].path) == ("cannot write o.jsonl: No space left on device", Path("o.jsonl"))
