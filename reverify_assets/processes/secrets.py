"""The secrets this process holds, and the one redactor of what it writes, logs and raises.

A secret is remembered where it is read: a judge server when it opens (its API key, from the environment), the
CLI when it loads a config that points at one (``run.config_secrets``). From the first one on, every log
record the process makes is redacted as it is made, whichever logger and handler it goes to (the record factory
is process-wide; a filter on a logger would miss what its children log). The writers of rows and error messages
call ``redact`` and ``line_redactor``.

Process state, not an argument, on purpose: what must never show a secret includes the log records of Dagster,
aiohttp and alembic, which no argument of ours reaches, and a secret read in one step may reach the error
another prints.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from reverify_assets.processes.redaction import Redactor

_EXCEPTION_TEXT = logging.Formatter()


class _ProcessSecrets:
    def __init__(self) -> None:
        self.secrets: set[str] = set()
        self.redactor = Redactor(())

    def remember(self, secrets: Iterable[str | None]) -> None:
        new = {secret for secret in secrets if secret} - self.secrets
        if not new:
            return
        if not self.secrets:
            _redact_log_records(self)
        self.secrets |= new
        self.redactor = Redactor(self.secrets)


_PROCESS = _ProcessSecrets()


def remember(secrets: Iterable[str | None]) -> None:
    _PROCESS.remember(secrets)


def redact(text: str) -> str:
    return _PROCESS.redactor(text)


def line_redactor() -> Callable[[bytes], bytes] | None:
    """What redacts a line to be written; None while the process holds no secret (a loop over rows skips it)."""
    return _PROCESS.redactor.line if _PROCESS.redactor else None


def _redact_log_records(process: _ProcessSecrets) -> None:
    make_record = logging.getLogRecordFactory()

    def redacted_record(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = make_record(*args, **kwargs)
        _redact_record(record, process.redactor)
        return record

    logging.setLogRecordFactory(redacted_record)


def _redact_record(record: logging.LogRecord, redactor: Redactor) -> None:
    try:
        message = record.getMessage()
    except Exception:  # a malformed call: logging reports it when the record is emitted, as it would have
        return
    if (redacted := redactor(message)) is not message:
        record.msg, record.args = redacted, None
    if record.exc_info and record.exc_info[0] is not None:
        trace = _EXCEPTION_TEXT.formatException(record.exc_info)
        if (redacted := redactor(trace)) is not trace:
            record.exc_info, record.exc_text = None, redacted  # a formatter appends exc_text as it is
    if record.stack_info and (redacted := redactor(record.stack_info)) is not record.stack_info:
        record.stack_info = redacted
