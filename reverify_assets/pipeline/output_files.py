"""How a verify step treats the files already at its output: protect, resume from, or append to them."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from reverify_assets.errors import ReverifyError
from reverify_assets.lib.file_names import RunFiles
from reverify_assets.lib.key_index import scan_keys
from reverify_assets.lib.output_tail import repair_unterminated_tail
from reverify_assets.lib.resume_cache import CacheStatus, read_cache

log = logging.getLogger("reverify")


@dataclass(frozen=True)
class OutputPolicy:
    overwrite: bool = False
    resume: bool = False
    append: bool = False  # recovery onto an existing output: keys already there are skipped
    max_attempts: int = 3
    announce_resume: bool = True  # shards always resume: saying so for each would be noise
    allow_mixed_configs: bool = False  # resume an output whose rows another verifier config scored

    @property
    def is_fresh(self) -> bool:
        return not (self.resume or self.append)


def check_fresh_output(files: RunFiles, *, overwrite: bool) -> None:
    if overwrite:
        return
    for path in (files.output, files.sidecar):
        if path.exists():
            raise ReverifyError(
                f"Output file already exists: '{path}'. Pass --overwrite to delete it and start fresh, "
                "or --resume to continue from it."
            )


def start_fresh(files: RunFiles) -> None:
    """Remove what an earlier run left; the sidecar is recreated even when it stays empty, as NeMo Gym does."""
    for path in (files.output, files.sidecar, files.metrics):
        path.unlink(missing_ok=True)
    files.sidecar.parent.mkdir(parents=True, exist_ok=True)
    files.sidecar.touch()


def prepare_output(files: RunFiles, policy: OutputPolicy) -> CacheStatus | None:
    """Make the output ready for appending; the cache of what is settled, or None for a fresh run."""
    if policy.resume:
        if not (files.output.exists() or files.sidecar.exists()):
            if policy.announce_resume:
                log.info("Skipping resume_from_cache because cache paths don't exist! Running every row.")
        else:
            _repair(files)
            return read_cache(files.output, files.sidecar, policy.max_attempts)
    elif policy.append:
        _repair(files)
        files.sidecar.parent.mkdir(parents=True, exist_ok=True)
        files.sidecar.touch()
        status = CacheStatus.empty(policy.max_attempts)
        if files.output.exists():
            status = CacheStatus(
                scan_keys(files.output).frame.select("task", "rollout"),
                status.terminal,
                status.maxed_out,
                policy.max_attempts,
            )
        return status
    check_fresh_output(files, overwrite=policy.overwrite)
    start_fresh(files)
    return None


def check_resumed_configs(files: RunFiles, cache: CacheStatus, config_hash: str, policy: OutputPolicy) -> None:
    """A resumed output must not end up scored by two verifier configs without the user saying so."""
    others = {config: rows for config, rows in cache.output_configs.items() if config != config_hash}
    if not policy.resume or not others:
        return
    found = ", ".join(f"{config} ({rows} rows)" for config, rows in sorted(others.items(), key=lambda kv: -kv[1]))
    message = f"{files.output} holds rows scored by other verifier configs than this run's {config_hash}: {found}"
    if not policy.allow_mixed_configs:
        raise ReverifyError(
            f"{message}. Resuming would mix graders in one output: run with the config that began it, start "
            "again with --overwrite, or pass --allow-mixed-configs (each row keeps its reverify_provenance)."
        )
    log.warning("WARNING: %s; continuing because --allow-mixed-configs was given.", message)


def _repair(files: RunFiles) -> None:
    for path in (files.output, files.sidecar):
        if (done := repair_unterminated_tail(path)) is not None:
            log.warning("WARNING: %s", done)
