"""How a failure of ours crosses Dagster, both ways.

Into Dagster: a step that stops on purpose (a refused output, a bad row, a secret the run config does not keep)
raises Dagster's ``Failure`` with our message as its one-line description, the rest as metadata. The UI then
leads with our words, where any other exception reads as Dagster's "Error occurred while executing op" wrapper
over a stack trace; a traceback is kept for the errors nobody meant (a bug), which stay as they are.

Out of Dagster: the command line runs the same steps in its own process, and gets our error back as it was
raised, with its exit code. (Dagster raises a step's unexpected error as it is, and the command shows its
traceback: it is a bug.)
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import dagster as dg

from reverify_assets.defs.dagster_internals import (
    DagsterUserCodeProcessError,
    SerializableErrorInfo,
    normalize_metadata,
)
from reverify_assets.errors import ConfigError, ReverifyError, ServerError
from reverify_assets.processes import interrupts
from reverify_assets.processes import secrets as process_secrets

F = TypeVar("F", bound=Callable[..., Any])


class Refusal(DagsterUserCodeProcessError, dg.Failure):
    """A step's ``ReverifyError`` as Dagster shows a deliberate failure; ``error`` is the original, for the CLI.

    A ``Failure``: Dagster files it as intentional, its description and metadata shown first. Also one of
    Dagster's ``DagsterUserCodeProcessError``s, the error a process forwards already serialized, which Dagster
    records as it is given: here our message with no stack, since where in Dagster's machinery the step stopped
    tells the user nothing (``tests/unit/test_step_failures.py`` holds Dagster to both). Never retried: the same
    files give the same refusal (and Dagster passes its errors by a retry policy anyway). Redacted as the
    command line's message is: a secret the process holds never reaches the UI."""

    def __init__(self, error: ReverifyError, metadata: dict[str, Any] | None = None) -> None:
        first, _, rest = process_secrets.redact(str(error)).partition("\n")
        shown = SerializableErrorInfo(message=f"{first}\n", stack=[], cls_name=type(error).__name__)
        # Dagster's error first: its __init__ hands the message on to Failure's (the next in line).
        super().__init__(first, user_code_process_error_infos=[shown])
        shown_metadata: dict[str, Any] = {"error": type(error).__name__, "exit code": error.exit_code}
        if path := getattr(error, "path", None):
            shown_metadata["file"] = dg.MetadataValue.path(str(path))
        if (line := getattr(error, "line", None)) is not None:
            shown_metadata["line"] = line
        if key := getattr(error, "key", None):
            shown_metadata["key"] = key
        if isinstance(error, ConfigError) and error.source:
            shown_metadata["source"] = error.source
        if isinstance(error, ServerError) and error.server:
            shown_metadata["server"] = error.server
        if rest.strip():
            shown_metadata["details"] = dg.MetadataValue.md(rest.strip())
        self.metadata = normalize_metadata(shown_metadata | (metadata or {}))
        self.allow_retries = False
        self.error = error
        self._given_metadata = metadata

    def __reduce__(self) -> tuple[Any, ...]:
        """Rebuilt from the error itself (a copy or a pickle would otherwise call ``Refusal`` with its message)."""
        return (Refusal, (self.error, self._given_metadata))


@contextmanager
def refusals_as_failures() -> Iterator[None]:
    try:
        yield
    except ReverifyError as exc:
        # `from None`: the UI would otherwise append our error again, with its traceback, as the cause.
        raise Refusal(exc) from None


def step_failures(compute: F) -> F:
    """Decorates an asset's body (plain or generator) so that our errors fail its step as ``Refusal``s.

    Dagster reads the body's parameters and type hints from the wrapper: they are the body's, resolved where the
    body was written (a module with ``from __future__ import annotations`` holds them as text)."""
    if inspect.isgeneratorfunction(compute):

        @functools.wraps(compute)
        def generate(*args: Any, **kwargs: Any) -> Iterator[Any]:
            with refusals_as_failures():
                yield from compute(*args, **kwargs)

        wrapper: Callable[..., Any] = generate
    else:

        @functools.wraps(compute)
        def call(*args: Any, **kwargs: Any) -> Any:
            with refusals_as_failures():
                return compute(*args, **kwargs)

        wrapper = call
    wrapper.__annotations__ = typing.get_type_hints(compute, include_extras=True)
    wrapper.__signature__ = inspect.signature(compute, eval_str=True)  # type: ignore[attr-defined]
    return wrapper  # type: ignore[return-value]


@contextmanager
def command_errors() -> Iterator[None]:
    """Around a command's run in this process: a step's error comes out as the command's, Ctrl-C as itself."""
    try:
        yield
    except Refusal as exc:
        raise exc.error from None
    except dg.Failure as exc:  # one of Dagster's own words for a deliberate stop, without an error of ours
        raise ReverifyError(exc.description or "the run failed") from None
    except dg.DagsterExecutionInterruptedError as exc:  # Ctrl-C, as Dagster raises it inside a step
        raise KeyboardInterrupt from exc
    finally:
        interrupts.reinstate()
