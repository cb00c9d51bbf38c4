"""A failed ``/aggregate_metrics``: the body each attempt sends, and the command that finishes the run."""

from __future__ import annotations

import os
import shlex
import tempfile
from pathlib import Path

import pytest

from reverify_assets.files.names import expand_input_glob
from reverify_assets.files.positional_reader import PositionalReader
from reverify_assets.processes import secrets as process_secrets
from reverify_assets.run.unfinished_metrics import finish_command, unfinished_metrics_message


def test_each_reader_of_a_spool_starts_at_its_first_byte_whatever_the_others_did() -> None:
    with tempfile.TemporaryFile() as spool:
        spool.write(b'{"verify_responses":[1,2,3]}')
        spool.flush()  # the spool's own offset is at its end, as when the last row was written
        first = PositionalReader(spool.fileno())
        assert first.read(5) == b'{"ver'
        second = PositionalReader(spool.fileno())
        assert second.read() == b'{"verify_responses":[1,2,3]}'
        assert first.read() == b'ify_responses":[1,2,3]}'
        assert first.seek(-3, os.SEEK_END) == 25 and first.read() == b"3]}"
        assert first.seek(0) == 0 and first.tell() == 0
        first.close()
        second.close()
        spool.seek(0)
        assert spool.read(1) == b"{", "closing a reader leaves the spool open"


@pytest.mark.parametrize(
    ("configs", "overrides", "output", "mixed", "expected"),
    [
        (
            ["/c/fake.yaml"],
            [],
            "/out/rs.jsonl",
            False,
            "reverify aggregate --config /c/fake.yaml --input-glob /out/rs.jsonl --output /out/rs.jsonl",
        ),
        (
            ["/c/a.yaml", "/c/b.yaml"],
            ["++fake.resources_servers.some_verifier.url=http://h:1"],
            "/out/rs.jsonl",
            True,
            "reverify aggregate --config /c/a.yaml --config /c/b.yaml --input-glob /out/rs.jsonl --output "
            "/out/rs.jsonl ++fake.resources_servers.some_verifier.url=http://h:1 --allow-mixed-configs",
        ),
        (
            ["/my configs/c.yaml"],
            ["++x.y='a b'"],
            "/out/run [1]*.jsonl",
            False,
            "reverify aggregate --config '/my configs/c.yaml' --input-glob '/out/run [[]1][*].jsonl' --output "
            "'/out/run [1]*.jsonl' '++x.y='\"'\"'a b'\"'\"''",
        ),
    ],
)
def test_the_finishing_command_is_the_runs_config_over_its_output(
    configs: list[str], overrides: list[str], output: str, mixed: bool, expected: str
) -> None:
    command = finish_command(configs, overrides, Path(output), allow_mixed_configs=mixed)
    assert command == expected
    words = shlex.split(command)  # as the user's shell reads it
    assert words[words.index("--output") + 1] == output and all(override in words for override in overrides)


def test_the_finishing_glob_names_the_output_alone_even_with_glob_characters(tmp_path: Path) -> None:
    output = tmp_path / "run [1]*.jsonl"
    for path in (output, tmp_path / "run 1x.jsonl", tmp_path / "run [1]*_failures.jsonl"):
        path.write_text("{}\n")
    words = shlex.split(finish_command(["c.yaml"], [], output, allow_mixed_configs=False))
    assert expand_input_glob(words[words.index("--input-glob") + 1]) == [output]


def test_the_message_names_the_files_and_ends_with_the_command() -> None:
    message = unfinished_metrics_message(
        "resources server 'fake' gave no aggregate metrics: POST http://h/aggregate_metrics: HTTP 503: down.",
        Path("/out/rs.jsonl"),
        12,
        "reverify aggregate ...",
    )
    assert message == (
        "resources server 'fake' gave no aggregate metrics: POST http://h/aggregate_metrics: HTTP 503: down. "
        "Every verified row is kept: 12 rows in /out/rs.jsonl, the failures in /out/rs_failures.jsonl; only "
        "/out/rs_aggregate_metrics.json was not written. Once the server's metrics work, finish the run with: "
        "reverify aggregate ..."
    )
    assert "\n" not in message


def test_an_override_holding_a_secret_is_left_out_of_the_finishing_command() -> None:
    key = "sk-test-0123456789abcdefghij"
    process_secrets.remember([key])
    overrides = ["++judge.resources_servers.j.grading=strict", f"++judge.resources_servers.j.openai_api_key={key}"]
    command = finish_command(["c.yaml"], overrides, Path("/out/o.jsonl"), allow_mixed_configs=False)
    assert key[:8] not in command and "++judge.resources_servers.j.grading=strict" in command
    assert command.endswith("(and the run's overrides that hold a secret, left out here)")
