"""NeMo-Gym-shaped OmegaConf YAML: several files merged in order, then ``++key=value`` overrides, each into a
block the files declare (``override_paths``)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from reverify_assets.config.override_paths import check_override_paths
from reverify_assets.errors import ReverifyError, UsageError


def load_config(paths: Sequence[Path], overrides: Sequence[str] = ()) -> dict[str, Any]:
    merged: DictConfig = OmegaConf.create({})
    for path in paths:
        merged = OmegaConf.merge(merged, _load_file(path))  # type: ignore[assignment]
    if overrides:
        parsed = parse_overrides(overrides)
        check_override_paths(merged, overrides)
        merged = OmegaConf.merge(merged, parsed)  # type: ignore[assignment]
    try:
        resolved = OmegaConf.to_container(merged, resolve=True)
    except OmegaConfBaseException as exc:
        raise ReverifyError(f"config: cannot resolve interpolation: {exc}") from exc
    assert isinstance(resolved, dict)
    return resolved  # type: ignore[return-value]


def _load_file(path: Path) -> DictConfig:
    if not path.is_file():
        raise ReverifyError(f"config file not found: {path}")
    try:
        loaded = OmegaConf.load(path)
    except Exception as exc:  # yaml raises several unrelated types; all mean "not valid YAML"
        raise ReverifyError(f"config file {path} is not valid YAML: {exc}") from exc
    if not isinstance(loaded, DictConfig):
        raise ReverifyError(f"config file {path} must hold a mapping at the top level")
    return loaded


def parse_overrides(overrides: Sequence[str]) -> DictConfig:
    """Hydra-style overrides; ``+`` and ``++`` prefixes mean the same here (add or replace)."""
    dotlist = []
    for override in overrides:
        body = override.lstrip("+")
        name, sep, _ = body.partition("=")
        if not sep or not name or any(not part for part in name.split(".")):
            raise UsageError(f"override {override!r} is not of the form ++dotted.key=value")
        dotlist.append(body)
    try:
        return OmegaConf.from_dotlist(dotlist)
    except (OmegaConfBaseException, yaml.YAMLError) as exc:  # values are YAML: `={question}` is a bad mapping
        raise UsageError(f"cannot apply overrides {list(overrides)}: {exc}") from exc


OVERRIDE_KEY = re.compile(r"^[A-Za-z_][\w-]*(\.[A-Za-z_0-9][\w-]*)*=")


def is_override(token: str) -> bool:
    """``++a.b=c``, ``+a.b=c`` or a bare ``a.b=c``; a path that merely contains ``=`` is not one."""
    return token.startswith("+") or bool(OVERRIDE_KEY.match(token))
