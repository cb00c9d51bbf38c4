"""docs/architecture.md answers "where is X" in one hop: every module or package it names exists, and every
package of the code is on its map of layers."""

from __future__ import annotations

import re
from pathlib import Path

import reverify_assets

PACKAGE = Path(reverify_assets.__file__).parent
PAGE = PACKAGE.parent / "docs" / "architecture.md"


def test_every_module_and_package_the_page_names_exists() -> None:
    named = set(re.findall(r"`([a-z_]+/(?:[a-z_/]+\.py)?)`", PAGE.read_text(encoding="utf-8"))) - {"reverify_assets/"}
    assert named, "the page names no module"
    assert sorted(path for path in named if not (PACKAGE / path).exists()) == []


def test_every_package_is_on_the_map_of_layers() -> None:
    layers = PAGE.read_text(encoding="utf-8").split("## The layers", 1)[1].split("```")[1]
    on_the_map = {name for line in layers.splitlines() for name in line.split("  ")[0].split(" | ") if name}
    packages = {path.parent.name for path in PACKAGE.glob("*/__init__.py")}
    assert packages - on_the_map == set()
