"""docs/cli.md is what the parser says, word for word."""

import argparse
from pathlib import Path

import pytest

from reverify_assets.cli.main import build_parser
from reverify_assets.cli.reference import REFERENCE, REGENERATE, main, render


def test_the_reference_page_is_the_parsers() -> None:
    assert REFERENCE.read_text(encoding="utf-8") == render(build_parser()), f"docs/cli.md is stale: run {REGENERATE}"


def test_every_command_and_option_is_on_the_page() -> None:
    page = render(build_parser())
    for command in ("run", "aggregate", "serve", "backfill", "probe"):
        assert f"## reverify {command}\n" in page
    assert "| `--parallel` | int | `1` |" in page and "| `--output`, `-o` | text | required |" in page


def test_check_mode_fails_on_a_stale_page(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stale = tmp_path / "cli.md"
    stale.write_text("# an old page\n", encoding="utf-8")
    monkeypatch.setattr("reverify_assets.cli.reference.REFERENCE", stale)
    assert main(["--check"]) == 1
    assert "is stale: regenerate it with" in capsys.readouterr().err
    assert main([]) == 0 and main(["--check"]) == 0


# The manual's pages on which each command's flags are explained, beyond their one line in docs/cli.md.
TOPIC_PAGES = {
    "run": ["runs.md", "judges.md", "configs.md", "rollout-identity.md"],
    "aggregate": ["metrics.md", "rollout-health.md"],
    "serve": ["configs.md"],
    "judge-serve": ["judges.md"],
    "shards": ["dagster.md"],
    "status": ["dagster.md"],
    "backfill": ["dagster.md", "scale-out.md"],
    "ui": ["dagster.md"],
    "compare": ["trust.md"],
    "noise": ["trust.md"],
    "probe": ["trust.md"],
}


def test_every_flag_of_every_command_is_explained_on_a_page_of_the_manual() -> None:
    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert set(commands.choices) == set(TOPIC_PAGES), "a command without its pages in TOPIC_PAGES"
    unexplained = []
    for name, command in commands.choices.items():
        pages = " ".join((REFERENCE.parent / page).read_text(encoding="utf-8") for page in TOPIC_PAGES[name])
        flags = [option for action in command._actions for option in action.option_strings if option.startswith("--")]
        unexplained += [f"reverify {name} {flag}" for flag in flags if flag != "--help" and f"`{flag}" not in pages]
    assert unexplained == []
