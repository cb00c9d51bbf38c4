"""Our errors in a Dagster step: a deliberate Failure that leads with our message in the UI, and the same error
back on the command line."""

from __future__ import annotations

import errno
import pickle
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

from reverify_assets.defs.failures import Refusal, command_errors, step_failures
from reverify_assets.errors import (
    ConfigError,
    InputError,
    OutputError,
    ReverifyError,
    ServerError,
    UsageError,
    WriteError,
)
from reverify_assets.processes import secrets as process_secrets
from reverify_assets.processes.redaction import Redactor


@pytest.mark.parametrize(
    ("error", "description", "metadata"),
    [
        (
            ReverifyError("rollouts.jsonl:3: not valid JSON"),
            "rollouts.jsonl:3: not valid JSON",
            {"error": "ReverifyError", "exit code": 1},
        ),
        (UsageError("--append needs --judge-failed-only"), "--append needs --judge-failed-only", {"exit code": 2}),
        (
            WriteError(Path("/out/r.jsonl"), OSError(errno.ENOSPC, "No space left on device")),
            "cannot write /out/r.jsonl: No space left on device",
            {"error": "WriteError", "file": "/out/r.jsonl"},
        ),
        (
            ReverifyError("the metrics are not written\n  reverify aggregate --config c.yaml"),
            "the metrics are not written",
            {"details": "reverify aggregate --config c.yaml"},
        ),
        (
            InputError("r.jsonl:3: not valid JSON", path=Path("/in/r.jsonl"), line=3, key="(task 1, rollout 2)"),
            "r.jsonl:3: not valid JSON",
            {"error": "InputError", "file": "/in/r.jsonl", "line": 3, "key": "(task 1, rollout 2)"},
        ),
        (
            ConfigError("config: replicas is 0", key="mcqa.resources_servers.mcqa.replicas", source="c.yaml"),
            "config: replicas is 0",
            {"error": "ConfigError", "key": "mcqa.resources_servers.mcqa.replicas", "source": "c.yaml"},
        ),
        (
            ServerError("resources server 'mcqa' did not start", server="mcqa"),
            "resources server 'mcqa' did not start",
            {"error": "ServerError", "server": "mcqa"},
        ),
    ],
    ids=["plain", "usage", "a file", "several lines", "a line and key", "a config key", "a server"],
)
def test_a_refusal_leads_with_the_first_line_and_keeps_the_rest_as_metadata(
    error: ReverifyError, description: str, metadata: dict[str, object]
) -> None:
    refusal = Refusal(error)
    assert refusal.description == description and refusal.error is error
    shown = {key: getattr(value, "value", value) for key, value in refusal.metadata.items()}
    assert metadata.items() <= shown.items(), shown
    # A field the error leaves unset is not shown.
    fields = {"file": error.path, "line": error.line, "key": error.key}
    fields |= {"source": getattr(error, "source", None), "server": getattr(error, "server", None)}
    assert {name for name, value in fields.items() if value is None}.isdisjoint(shown), shown


REFUSED = OutputError("output /x/r.jsonl exists: pass --overwrite or --resume", path=Path("/x/r.jsonl"))


@dg.asset
@step_failures
def returns(context: dg.AssetExecutionContext) -> None:
    raise REFUSED


@dg.asset
@step_failures
def generates(context: dg.AssetExecutionContext) -> Iterator[dg.Output[None]]:
    yield from ()
    raise REFUSED


@dg.asset
@step_failures
def breaks(context: dg.AssetExecutionContext) -> None:
    raise KeyError("a bug")


@pytest.mark.parametrize("asset", [returns, generates], ids=["function", "generator"])
def test_a_step_refused_on_purpose_fails_as_dagsters_failure_with_our_message_and_no_cause(
    asset: dg.AssetsDefinition,
) -> None:
    result = dg.materialize([asset], raise_on_error=False)
    [failure] = [event for event in result.all_events if event.is_step_failure]
    data = failure.step_failure_data
    assert data.user_failure_data is not None and data.user_failure_data.label == "intentional-failure"
    assert data.user_failure_data.description == str(REFUSED)
    assert data.user_failure_data.metadata["file"] == dg.MetadataValue.path("/x/r.jsonl")  # the error's path
    # What the UI shows: our message alone, no Dagster wrapper, no stack trace, no cause.
    assert data.error is not None and data.error.message == f"{REFUSED}\n" and data.error.cls_name == "OutputError"
    assert data.error.stack == [] and data.error.cause is None


def test_an_unexpected_error_keeps_dagsters_wrapper_and_its_traceback() -> None:
    result = dg.materialize([breaks], raise_on_error=False)
    [failure] = [event for event in result.all_events if event.is_step_failure]
    data = failure.step_failure_data
    assert data.user_failure_data is None
    assert data.error is not None and data.error.cause is not None and data.error.cause.cls_name == "KeyError"


@pytest.mark.parametrize("asset", [returns, generates], ids=["function", "generator"])
def test_the_command_line_gets_our_error_back_as_it_was_raised(asset: dg.AssetsDefinition) -> None:
    with pytest.raises(OutputError) as raised, command_errors():
        dg.materialize([asset])
    assert raised.value is REFUSED and raised.value.path == Path("/x/r.jsonl")


def test_dagsters_own_failure_reaches_the_command_line_as_our_error() -> None:
    @dg.asset
    def stops() -> None:
        raise dg.Failure(description="this run is of partition 'a', but its resource writes 'b'")

    with pytest.raises(ReverifyError) as caught:
        with command_errors():
            dg.materialize([stops])
    # Ours, of no kind more specific, and with Dagster's description as its whole message.
    assert type(caught.value) is ReverifyError
    assert str(caught.value) == "this run is of partition 'a', but its resource writes 'b'"


def test_a_refusal_survives_a_pickle_as_the_error_it_carries() -> None:
    refusal = pickle.loads(pickle.dumps(Refusal(UsageError("--append needs --judge-failed-only"), {"hint": "x"})))
    assert isinstance(refusal.error, UsageError) and refusal.error.exit_code == 2
    assert refusal.description == "--append needs --judge-failed-only" and refusal.metadata["hint"].value == "x"


def test_a_secret_the_process_holds_never_reaches_the_ui(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-test-0123456789abcdef"
    monkeypatch.setattr(process_secrets, "redact", Redactor([secret]))  # as the process's, once it knows the key
    refusal = Refusal(ReverifyError(f"judge refused key {secret}\nwith {secret}"))
    assert secret not in refusal.description and secret not in str(refusal.metadata["details"].value)
    assert str(refusal.error) == f"judge refused key {secret}\nwith {secret}", "the CLI redacts when it prints"
