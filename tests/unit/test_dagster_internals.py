"""Dagster's private modules are reached through ``defs.dagster_internals`` only, the one module to read on an
upgrade of Dagster."""

from __future__ import annotations

import ast
from pathlib import Path

import reverify_assets

PACKAGE = Path(reverify_assets.__file__).parent
THE_ONE_MODULE = PACKAGE / "defs" / "dagster_internals.py"


def private_dagster_imports(source: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source.read_text(), str(source))):
        if isinstance(node, ast.ImportFrom) and node.module is not None:
            modules = [node.module]
        elif isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        else:
            continue
        found += [f"{source}:{node.lineno}: {module}" for module in modules if module.startswith("dagster._")]
    return found


def test_only_the_internals_module_imports_dagsters_private_modules() -> None:
    sources = [*PACKAGE.rglob("*.py"), PACKAGE.parent / "definitions.py"]
    elsewhere = [found for source in sources if source != THE_ONE_MODULE for found in private_dagster_imports(source)]
    assert elsewhere == []
    assert private_dagster_imports(THE_ONE_MODULE), "the module this test guards has moved"


def test_each_name_it_gives_says_what_it_is_for() -> None:
    tree = ast.parse(THE_ONE_MODULE.read_text())
    names = [
        alias.asname or alias.name for node in tree.body if isinstance(node, ast.ImportFrom) for alias in node.names
    ]
    explained = ast.get_docstring(tree) or ""
    assert [name for name in names if name != "annotations" and f"``{name}``" not in explained] == []
