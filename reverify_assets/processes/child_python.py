"""A child Python running one of our modules with the ``reverify_assets`` this process imported.

``python -m`` puts the current directory first on ``sys.path``: started in a folder that holds another copy of
the package (a second worktree, say), a child would run that copy's code beside ours. ``-P`` leaves the
current directory out, and the folder this process imported the package from goes first on PYTHONPATH.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import reverify_assets

PACKAGE_ROOT = str(Path(reverify_assets.__file__).resolve().parents[1])


def module_command(module: str, *arguments: str) -> list[str]:
    return [sys.executable, "-P", "-m", module, *arguments]


def child_environment() -> dict[str, str]:
    """This process's environment, with our package's folder first on PYTHONPATH."""
    paths = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([PACKAGE_ROOT, paths]) if paths else PACKAGE_ROOT}
