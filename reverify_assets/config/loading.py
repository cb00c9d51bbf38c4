"""NeMo-Gym-shaped OmegaConf YAML: several files merged in order, then ``++key=value`` overrides, each into a
block the files declare (``override_paths``). Who set each value is kept (``sources``) for the errors to say."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from reverify_assets.config.override_paths import check_override_paths
from reverify_assets.config.sources import ConfigSources, key_path
from reverify_assets.errors import ConfigError, UsageError


@dataclass(frozen=True)
class LoadedConfig:
    values: dict[str, Any]  # merged and resolved
    sources: ConfigSources


def load_config(paths: Sequence[Path], overrides: Sequence[str] = ()) -> LoadedConfig:
    merged: DictConfig = OmegaConf.create({})
    sources = ConfigSources()
    for path in paths:
        loaded = _load_file(path)
        merged = OmegaConf.merge(merged, loaded)  # type: ignore[assignment]
        sources.add_file(str(path), _unresolved(loaded))
    parsed = [(override, parse_override(override)) for override in overrides]
    check_override_paths(merged, overrides, sources)
    for override, tree in parsed:
        merged = OmegaConf.merge(merged, tree)  # type: ignore[assignment]
        sources.add_override(override.partition("=")[0], _unresolved(tree))
    try:
        resolved = OmegaConf.to_container(merged, resolve=True)
    except OmegaConfBaseException as exc:
        keys = key_path(exc.full_key) if getattr(exc, "full_key", None) else None
        where = sources.name(keys) + " " if keys is not None else ""
        raise ConfigError(
            f"config: {where}cannot resolve interpolation: {str(exc).splitlines()[0]}",
            key=".".join(keys) if keys is not None else None,
            source=sources.set_by(keys) if keys is not None else None,
        ) from exc
    assert isinstance(resolved, dict)
    return LoadedConfig(resolved, sources)  # type: ignore[arg-type]


def _load_file(path: Path) -> DictConfig:
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}", source=str(path))
    try:
        loaded = OmegaConf.load(path)
    except Exception as exc:  # yaml raises several unrelated types; all mean "not valid YAML"
        raise ConfigError(f"config file {path} is not valid YAML: {exc}", source=str(path)) from exc
    if not isinstance(loaded, DictConfig):
        raise ConfigError(f"config file {path} must hold a mapping at the top level", source=str(path))
    return loaded


def _unresolved(tree: DictConfig) -> dict[Any, Any]:
    container = OmegaConf.to_container(tree, resolve=False)
    assert isinstance(container, dict)
    return container


def parse_override(override: str) -> DictConfig:
    """A Hydra-style override; ``+`` and ``++`` prefixes mean the same here (add or replace)."""
    body = override.lstrip("+")
    name, sep, _ = body.partition("=")
    if not sep or not name or any(not part for part in name.split(".")):
        raise UsageError(f"override {override!r} is not of the form ++dotted.key=value")
    try:
        return OmegaConf.from_dotlist([body])
    except (OmegaConfBaseException, yaml.YAMLError) as exc:  # values are YAML: `={question}` is a bad mapping
        raise UsageError(f"cannot apply override {override!r}: {exc}") from exc


OVERRIDE_KEY = re.compile(r"^[A-Za-z_][\w-]*(\.[A-Za-z_0-9][\w-]*)*=")


def is_override(token: str) -> bool:
    """``++a.b=c``, ``+a.b=c`` or a bare ``a.b=c``; a path that merely contains ``=`` is not one."""
    return token.startswith("+") or bool(OVERRIDE_KEY.match(token))
