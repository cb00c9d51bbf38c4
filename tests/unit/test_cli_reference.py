"""docs/cli.md is what the parser says, word for word."""

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
