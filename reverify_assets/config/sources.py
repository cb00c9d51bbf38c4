"""Which ``--config`` file or ``++`` override set each value of the merged config.

Several files merge in order and the overrides come last, so the file a user must fix is the last one that sets
the key: an error naming a dotted path says it (``ConfigSources.name``). A mapping is set by every source that
adds to it; a plain value by the last one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

KeyPath = tuple[str, ...]
# `${a.b}`, the whole value another key's: what it names is what set the value. Other interpolations (resolvers,
# relative keys, text around them) are named where they are written.
REFERENCE = re.compile(r"^\$\{([A-Za-z_][\w-]*(?:\.[\w-]+)*)\}$")
# ${a} -> ${b} -> ...: enough for any sensible chain; OmegaConf itself refuses a loop when it resolves.
MAX_REFERENCE_HOPS = 8
NOT_SET = "not set by any --config file or override"
DEFAULT = f"{NOT_SET}: the default"  # said of the path asked about; a `${...}` naming nothing is just not set


@dataclass(frozen=True)
class _Setter:
    name: str  # a config file as given, or an override's key as typed
    is_override: bool


@dataclass
class _Entry:
    setters: list[_Setter]  # in merge order
    is_mapping: bool
    reference: str | None = None  # the key a `${...}` value names


class ConfigSources:
    def __init__(self, *, tracked: bool = True) -> None:
        self.tracked = tracked  # False: a config built in code, whose paths are named without a source
        self._entries: dict[KeyPath, _Entry] = {}

    def add_file(self, path: str, tree: Mapping[Any, Any]) -> None:
        """``tree``, a config file's unresolved content, merged after everything added before."""
        self._add(_Setter(path, is_override=False), (), tree)

    def add_override(self, key: str, tree: Mapping[Any, Any]) -> None:
        """``key``: the override as typed, without its value (it may be a key pasted by mistake)."""
        self._add(_Setter(key, is_override=True), (), tree)

    def _add(self, setter: _Setter, prefix: KeyPath, tree: Mapping[Any, Any]) -> None:
        for key, value in tree.items():
            path = (*prefix, str(key))
            entry = self._entries.get(path)
            if isinstance(value, Mapping) and entry is not None and (entry.is_mapping or entry.reference):
                # OmegaConf merges a mapping into one, and into the mapping a `${...}` names
                entry.is_mapping = True
                if entry.setters[-1] != setter:
                    entry.setters.append(setter)
            else:
                if entry is not None and entry.is_mapping:
                    self._forget_below(path)  # a value replaces the mapping, and everything it held
                reference = REFERENCE.match(value) if isinstance(value, str) else None
                is_mapping = isinstance(value, Mapping)
                self._entries[path] = _Entry([setter], is_mapping, reference.group(1) if reference else None)
            if isinstance(value, Mapping):
                self._add(setter, path, value)

    def _forget_below(self, path: KeyPath) -> None:
        for below in [known for known in self._entries if known[: len(path)] == path and len(known) > len(path)]:
            del self._entries[below]

    def name(self, path: Sequence[str | int]) -> str:
        """The path in backticks and where its value was set, e.g. "`a.b.c` (set in configs/x.yaml)"."""
        keys = tuple(map(str, path))
        shown = f"`{'.'.join(keys)}`"
        if not self.tracked:
            return shown
        origin = self.origin(keys)
        return f"{shown} ({DEFAULT if origin == NOT_SET else origin})"

    def set_by(self, path: Sequence[str | int]) -> str | None:
        """The last ``--config`` file or override (its key as typed) that set the value at ``path``: the one to fix,
        for an error's ``source``. None when none did, or for a config built in code."""
        if not self.tracked:
            return None
        keys = tuple(map(str, path))
        for depth in range(len(keys), 0, -1):
            entry = self._entries.get(keys[:depth])
            if entry is None:
                continue
            if entry.is_mapping and depth < len(keys) and entry.reference is None:
                return None  # the mapping is set, this key of it is not
            return entry.setters[-1].name
        return None

    def origin(self, keys: KeyPath, hops: int = MAX_REFERENCE_HOPS) -> str:
        """Where the value at ``keys`` was set: "set in a.yaml", "set by ++a.b on the command line", or ``NOT_SET``."""
        for depth in range(len(keys), 0, -1):
            entry = self._entries.get(keys[:depth])
            if entry is None:
                continue
            if entry.is_mapping and depth < len(keys) and entry.reference is None:
                break  # the mapping is set, this key of it is not
            where = "set " + _joined(entry.setters)
            if entry.reference is None or hops == 0:
                return where  # a plain value, or a path inside one (a list's item)
            target = (*entry.reference.split("."), *keys[depth:])
            return f"{where} as `${{{entry.reference}}}`; `{'.'.join(target)}` {self.origin(target, hops - 1)}"
        return NOT_SET


def _joined(setters: list[_Setter]) -> str:
    files = [setter.name for setter in setters if not setter.is_override]
    overrides = [setter.name for setter in setters if setter.is_override]
    said = [f"in {', '.join(files)}"] if files else []
    if overrides:
        said.append(f"by {', '.join(overrides)} on the command line")
    return " and ".join(said)


UNTRACKED = ConfigSources(tracked=False)


def key_path(full_key: str) -> KeyPath:
    """OmegaConf's ``full_key`` (``a.b``, ``l[1]``) as keys."""
    return tuple(re.findall(r"[^.\[\]]+", full_key))
