"""What the command line says when a command fails: one line, no traceback, the exit code of the failure."""

from __future__ import annotations

import errno

import pytest

from reverify_assets.cli import aggregate_command, main
from reverify_assets.errors import ReverifyError

AGGREGATE = ["aggregate", "--config", "c.yaml", "-i", "out/*.jsonl", "-o", "m.jsonl"]


@pytest.mark.parametrize(
    ("raised", "code", "said"),
    [
        (ReverifyError("c.yaml: `x` is not a field"), 1, "reverify: error: c.yaml: `x` is not a field"),
        (OSError(errno.EIO, "Input/output error", "/data/r.jsonl"), 1, "[Errno 5] Input/output error: '/data/r.jsonl'"),
        (OSError(errno.ENOSPC, "No space left on device"), 1, "reverify: error: [Errno 28] No space left on device"),
    ],
)
def test_a_failure_is_one_line_and_an_exit_code(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], raised: Exception, code: int, said: str
) -> None:
    def fail(*_: object) -> None:
        raise raised

    monkeypatch.setattr(aggregate_command, "aggregate_command", fail)
    assert main.main(AGGREGATE) == code
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err


def test_a_bug_is_not_hidden(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*_: object) -> None:
        raise KeyError("a bug of ours")

    monkeypatch.setattr(aggregate_command, "aggregate_command", fail)
    with pytest.raises(KeyError):
        main.main(AGGREGATE)
