"""Config mistakes stop ``reverify run`` before anything starts: exit 1, a message naming the key and the file or
override that set it, no server, no Dagster run, no file written."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import CONFORMANCE_INPUTS, CONFORMANCE_ROLLOUTS, MCQA_CONFIG, run_args, run_reverify

BLOCK = "mcqa.resources_servers.mcqa"


def run_with_configs(tmp_path: Path, *configs: Path, flags: tuple[str, ...] = ()) -> tuple[str, Path]:
    """``reverify run`` on the conformance set with ``configs`` merged after the shipped mcqa config; its stderr
    once it exits 1, and its Dagster home."""
    home = tmp_path / "home"
    args = run_args(MCQA_CONFIG, CONFORMANCE_INPUTS, CONFORMANCE_ROLLOUTS, tmp_path / "out" / "o.jsonl", *flags)
    for config in configs:
        args += ["--config", config]
    result = run_reverify(*args, home=home)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    return result.stderr, home


def assert_nothing_started(tmp_path: Path, home: Path) -> None:
    assert not (tmp_path / "out").exists()
    assert not (home / "reverify_work").exists()  # no start-up files, no Dagster run
    assert not (home / "storage").exists()


def second_config(tmp_path: Path, fields: str) -> Path:
    path = tmp_path / "second.yaml"
    path.write_text(f"mcqa:\n  resources_servers:\n    mcqa:\n{fields}")
    return path


def test_a_typo_in_a_second_config_file_names_that_file(tmp_path: Path) -> None:
    second = second_config(tmp_path, "      grading_mod: lenient_boxed\n")
    stderr, home = run_with_configs(tmp_path, second)
    assert (
        f"`{BLOCK}.grading_mod` (set in {second}) is not a field of the built-in `mcqa` server "
        "(did you mean `grading_mode`?)"
    ) in stderr
    assert_nothing_started(tmp_path, home)


def test_a_typo_in_an_override_names_the_override(tmp_path: Path) -> None:
    stderr, home = run_with_configs(tmp_path, flags=(f"++{BLOCK}.grading_mod=lenient_boxed",))
    assert f"`{BLOCK}.grading_mod` (set by ++{BLOCK}.grading_mod on the command line) is not a field" in stderr
    assert "(did you mean `grading_mode`?)" in stderr
    assert_nothing_started(tmp_path, home)


@pytest.mark.parametrize("url", ["not-a-url", "http://", "localhost:8000", "ftp://x"])
def test_a_malformed_url_fails_before_anything_starts(tmp_path: Path, url: str) -> None:
    second = second_config(tmp_path, f"      url: '{url}'\n")
    stderr, home = run_with_configs(tmp_path, second)
    assert f"config: `{BLOCK}.url` (set in {second}) is '{url}'; " in stderr
    assert_nothing_started(tmp_path, home)


def test_a_config_typo_under_resume_leaves_the_output_alone(tmp_path: Path) -> None:
    output = tmp_path / "out" / "o.jsonl"
    output.parent.mkdir()
    interrupted = b'{"_ng_task_index": 0, "_ng_rollout_index": 0, "reward": 1.0}\n{"_ng_task_ind'
    output.write_bytes(interrupted)
    second = second_config(tmp_path, "      grading_mod: lenient_boxed\n")
    stderr, _ = run_with_configs(tmp_path, second, flags=("--resume",))
    assert f"`{BLOCK}.grading_mod` (set in {second})" in stderr
    assert output.read_bytes() == interrupted  # the partial last line is still there
