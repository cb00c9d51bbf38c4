"""NeMo Gym's reverify-mode guard: only servers that declare themselves stateless are trusted."""

from __future__ import annotations

from collections.abc import Mapping

import orjson

from reverify_assets.errors import ServerError
from reverify_assets.files.dagster_home import probe_report_path

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
        raise ServerError(guard_message(unsafe), server=unsafe[0] if len(unsafe) == 1 else None)
    return bool(unsafe)


def probe_note(config_hash: str) -> str:
    """What ``reverify probe`` found about this config, for a run forced past the guard: evidence, not a bare
    warning; or how to get it. Read as plain JSON: the probe (``probe.report``) sits above the run's steps."""
    path = probe_report_path(config_hash)
    try:
        report = orjson.loads(path.read_bytes())
        verdict, created_at, rows = report["verdict"], report["created_at"], report["between_passes"]["rows"]
    except FileNotFoundError:
        return (
            f"No probe of verifier config {config_hash} yet: `reverify probe` with the same --config, --inputs and "
            "--rollouts scores a sample twice on fresh servers and says whether this rescore is sound."
        )
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError) as exc:
        return f"The probe report {path} cannot be read ({type(exc).__name__}): run `reverify probe` again."
    return f"Probe of verifier config {config_hash} ({created_at}, {rows} rows): {verdict}. ({path})"
