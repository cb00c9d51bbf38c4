"""NeMo Gym's reverify-mode guard: only servers that declare themselves stateless are trusted."""

from __future__ import annotations

from collections.abc import Mapping

from reverify_assets.errors import ReverifyError

SAFE_MODE = "stateless"


def unsafe_servers(modes: Mapping[str, str]) -> list[str]:
    return sorted(name for name, mode in modes.items() if mode != SAFE_MODE)


def guard_message(unsafe: list[str]) -> str:
    return (
        f"Resource server(s) {unsafe} have reverify_mode=UNSUPPORTED or UNKNOWN. Rewards computed by "
        "reverification may be incorrect. Pass --force (or ++force=true) to override "
        "(output will be prefixed with 'unsafe_')."
    )


def enforce_guard(modes: Mapping[str, str], *, force: bool) -> bool:
    """True when the run must write ``unsafe_`` files; raises when it must not run at all."""
    unsafe = unsafe_servers(modes)
    if unsafe and not force:
        raise ReverifyError(guard_message(unsafe))
    return bool(unsafe)
