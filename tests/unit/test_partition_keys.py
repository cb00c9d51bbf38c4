"""An output's path is its partition key: one Dagster refuses is refused before anything starts, naming it."""

from __future__ import annotations

from pathlib import Path

import pytest
from dagster._core.definitions.partitions.utils.base import INVALID_PARTITION_SUBSTRINGS

from reverify_assets.errors import OutputError
from reverify_assets.files.names import REFUSED_IN_PARTITION_KEYS, output_partition_key
from tests.support.cli import MCQA_CONFIG, run_reverify


def test_the_refused_substrings_are_dagsters() -> None:
    assert list(REFUSED_IN_PARTITION_KEYS) == INVALID_PARTITION_SUBSTRINGS


@pytest.mark.parametrize(
    ("name", "refused"),
    [("run...2/out.jsonl", "'...'"), ("tab\there/out.jsonl", "'\\t'"), ("new\nline.jsonl", "'\\n'")],
)
def test_a_path_dagster_cannot_key_is_refused_naming_what_it_holds(tmp_path: Path, name: str, refused: str) -> None:
    with pytest.raises(OutputError) as refusal:
        output_partition_key(tmp_path / name)
    assert refusal.value.path == tmp_path / name
    assert f"cannot hold [{refused}]; choose a path without them" in str(refusal.value)


@pytest.mark.parametrize("name", ["out.jsonl", "two..dots/out.jsonl", "ünïcode and spaces/out.jsonl"])
def test_an_ordinary_path_is_its_absolute_self(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.chdir(tmp_path)
    assert output_partition_key(Path(name)) == str(tmp_path / name)


@pytest.mark.parametrize("command", ["run", "aggregate"])
def test_the_commands_refuse_such_a_path_before_they_start(tmp_path: Path, command: str) -> None:
    output = tmp_path / "run...2" / "out.jsonl"
    source = tmp_path / "rollouts.jsonl"
    source.write_text('{"_ng_task_index": 0, "_ng_rollout_index": 0}\n')
    files = ["--inputs", source, "--rollouts", source] if command == "run" else ["--input-glob", source]
    done = run_reverify(command, "--config", MCQA_CONFIG, *files, "--output", output, home=tmp_path / "h")
    assert done.returncode == 1, done.stderr
    assert f"--output {str(output)!r}: its path is the output's Dagster partition key" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "h").exists() and not output.parent.exists(), "nothing started, nothing written"
