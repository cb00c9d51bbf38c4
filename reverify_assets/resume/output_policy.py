"""How a verify step treats the files already at its output: protect, resume from, or append to them."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from reverify_assets.errors import OutputError, StateError, WriteError
from reverify_assets.files.names import RunFiles, source_failures_path
from reverify_assets.files.output_lock import lock_file
from reverify_assets.files.output_tail import TailRepair, repair_unterminated_tail
from reverify_assets.files.preflight import check_no_collision
from reverify_assets.keys.key_index import KEY_COLUMNS, scan_keys
from reverify_assets.resume.settled_keys import CacheStatus, read_cache
from reverify_assets.rows.result_routing import ORIGINAL_CONFIG

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


def check_sources_kept(inputs: Path, rollouts: Path, output: Path, *, force: bool, append: bool) -> None:
    """Every file the run would create or replace, against every file it reads (whatever the flags: --resume
    appends to the output and sidecar too)."""
    written = _written("--output", RunFiles.for_output(output))
    if force:
        unsafe = RunFiles.for_output(output, unsafe=True)
        written |= _written(f"--force's {unsafe.output.name}", unsafe)
    source_sidecar = "the failures sidecar of --rollouts"
    sources = {"--inputs": inputs, "--rollouts": rollouts, source_sidecar: source_failures_path(rollouts)}
    # Completing the run's own rollouts file in place is the point of --append.
    allowed = [("--output", "--rollouts"), ("--output's failures sidecar", source_sidecar)]
    check_no_collision(written, sources, allowed if append else ())


def check_step_sources(files: RunFiles, inputs: Path, responses: Path, policy: OutputPolicy) -> None:
    """The same check in the verify step, which a run launched from the Dagster UI reaches without the CLI.
    ``responses``: the rollouts, or in judge recovery the source sidecar, which an --append onto the run's own
    rollouts file shares with the output."""
    sources = {"the inputs": inputs, "the rows' source": responses}
    allowed = [("the output's failures sidecar", "the rows' source")] if policy.append else []
    check_no_collision(_written("the output", files), sources, allowed)


def _written(name: str, files: RunFiles) -> dict[str, Path]:
    return {
        name: files.output,
        f"{name}'s failures sidecar": files.sidecar,
        f"{name}'s metrics file": files.metrics,
        f"{name}'s lock file": lock_file(files.output),
    }


def check_fresh_output(files: RunFiles, *, overwrite: bool) -> None:
    if overwrite:
        return
    for path in (files.output, files.sidecar):
        if path.exists():
            raise OutputError(
                f"Output file already exists: '{path}'. Pass --overwrite to delete it and start fresh, "
                "or --resume to continue from it.",
                path=path,
            )


def start_fresh(files: RunFiles) -> None:
    """Remove what an earlier run left; the sidecar is recreated even when it stays empty, as NeMo Gym does."""
    for path in (files.output, files.sidecar, files.metrics):
        path.unlink(missing_ok=True)
    files.sidecar.parent.mkdir(parents=True, exist_ok=True)
    files.sidecar.touch()


def prepare_output(files: RunFiles, policy: OutputPolicy, config_hash: str) -> CacheStatus | None:
    """Make the output ready for appending; the cache of what is settled, or None for a fresh run."""
    if policy.resume:
        if not (files.output.exists() or files.sidecar.exists()):
            if policy.announce_resume:
                log.info("Skipping resume_from_cache because cache paths don't exist! Running every row.")
        else:
            with _repaired_tails(files):
                cache = read_cache(files.output, files.sidecar, policy.max_attempts)
                check_resumed_configs(files, cache, config_hash, policy)
            return cache
    elif policy.append:
        with _repaired_tails(files):
            done = scan_keys(files.output).frame.select(KEY_COLUMNS) if files.output.exists() else None
        files.sidecar.parent.mkdir(parents=True, exist_ok=True)
        files.sidecar.touch()
        status = CacheStatus.empty(policy.max_attempts)
        if done is not None:
            status = CacheStatus(done, status.terminal, status.maxed_out, policy.max_attempts)
        return status
    check_fresh_output(files, overwrite=policy.overwrite)
    start_fresh(files)
    return None


def check_resumed_configs(files: RunFiles, cache: CacheStatus, config_hash: str, policy: OutputPolicy) -> None:
    """A resumed output must not end up scored by two verifier configs without the user saying so.

    Rows without ``reverify_provenance`` are another tool's (NeMo Gym's own ``gym eval reverify`` stamps none),
    which NeMo Gym resumes: they are carried on with a warning, and the metrics' provenance counts them apart.
    """
    if not policy.resume:
        return
    if unstamped := cache.output_configs.get(ORIGINAL_CONFIG, 0):
        log.warning(
            "WARNING: %s holds %d rows without reverify_provenance (written by NeMo Gym's gym eval reverify or "
            "another tool): the grader of those rows is unknown. They are kept; the metrics' provenance counts "
            "them as %r, apart from this run's config %s.",
            files.output,
            unstamped,
            ORIGINAL_CONFIG,
            config_hash,
        )
    others = {
        config: rows for config, rows in cache.output_configs.items() if config not in (config_hash, ORIGINAL_CONFIG)
    }
    if not others:
        return
    found = ", ".join(f"{config} ({rows} rows)" for config, rows in sorted(others.items(), key=lambda kv: -kv[1]))
    message = f"{files.output} holds rows scored by other verifier configs than this run's {config_hash}: {found}"
    if not policy.allow_mixed_configs:
        raise StateError(
            f"{message}. Resuming would mix graders in one output: run with the config that began it, start "
            "again with --overwrite, or pass --allow-mixed-configs (each row keeps its reverify_provenance).",
            path=files.output,
        )
    log.warning("WARNING: %s; continuing because --allow-mixed-configs was given.", message)


@contextmanager
def _repaired_tails(files: RunFiles) -> Iterator[None]:
    """The output and sidecar end in whole lines for the block; if it fails, they are put back as they were: an
    error exit (a refused config, a bad row) must not change what the user has."""
    repairs: list[TailRepair] = []
    try:
        for path in (files.output, files.sidecar):
            try:
                repair = repair_unterminated_tail(path)
            except OSError as exc:
                raise WriteError(path, exc) from exc
            if repair is not None:
                repairs.append(repair)
        yield
    except BaseException:
        for repair in repairs:
            repair.undo()
        raise
    for repair in repairs:
        log.warning("WARNING: %s", repair.message)
