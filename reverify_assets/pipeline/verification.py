"""One verify step: start the servers, pass the guard, verify every planned row, stop the servers."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import polars as pl

from reverify_assets.config.topology import ServerBlock
from reverify_assets.errors import ReverifyError
from reverify_assets.lib.file_names import RunFiles
from reverify_assets.pipeline.output_files import check_fresh_output, start_fresh
from reverify_assets.pipeline.preparation import VerifierSetup
from reverify_assets.pipeline.reverify_guard import enforce_guard, guard_message, unsafe_servers
from reverify_assets.pipeline.row_source import PairReader
from reverify_assets.pipeline.verify_loop import VerifyStats, verify_plan
from reverify_assets.verifier.client import VerifierClient
from reverify_assets.verifier.launcher import ServerFleet
from reverify_assets.verifier.retry import RetryPolicy

log = logging.getLogger("reverify")


@dataclass(frozen=True)
class VerificationResult:
    files: RunFiles
    stats: VerifyStats
    reverify_modes: dict[str, str]
    unsafe: bool


def routed_blocks(setup: VerifierSetup, plan: pl.DataFrame) -> list[ServerBlock]:
    return [setup.topology.servers[name] for name in sorted(plan["server"].unique().to_list())]


def client_session(concurrency: int) -> aiohttp.ClientSession:
    # One keep-alive pool for the whole run: a new connection per row costs more than grading it.
    connector = aiohttp.TCPConnector(limit=concurrency, limit_per_host=concurrency, force_close=False)
    return aiohttp.ClientSession(connector=connector)


def run_verification(
    plan: pl.DataFrame,
    setup: VerifierSetup,
    *,
    inputs: Path,
    rollouts: Path,
    output: Path,
    force: bool,
    overwrite: bool,
    concurrency: int,
    retry: RetryPolicy | None = None,
    on_progress: Callable[[VerifyStats], None] | None = None,
) -> VerificationResult:
    blocks = routed_blocks(setup, plan)
    with ServerFleet(blocks) as urls:
        return asyncio.run(
            _verify(
                plan,
                setup,
                urls,
                inputs=inputs,
                rollouts=rollouts,
                output=output,
                force=force,
                overwrite=overwrite,
                concurrency=concurrency,
                retry=retry or RetryPolicy(),
                on_progress=on_progress,
            )
        )


async def _verify(
    plan: pl.DataFrame,
    setup: VerifierSetup,
    urls: dict[str, str],
    *,
    inputs: Path,
    rollouts: Path,
    output: Path,
    force: bool,
    overwrite: bool,
    concurrency: int,
    retry: RetryPolicy,
    on_progress: Callable[[VerifyStats], None] | None,
) -> VerificationResult:
    async with AsyncExitStack() as stack:
        session = await stack.enter_async_context(client_session(concurrency))
        clients = {name: VerifierClient(name, url, session, retry) for name, url in urls.items()}
        modes = await _reverify_modes(clients)
        unsafe = enforce_guard(modes, force=force)
        if unsafe:
            log.warning(
                "WARNING: %s Continuing because --force was given.", guard_message(unsafe_servers(modes))
            )
        files = RunFiles.for_output(output, unsafe=unsafe)
        check_fresh_output(files, overwrite=overwrite)
        start_fresh(files)
        pairs = stack.enter_context(PairReader(inputs, rollouts))
        stats = await verify_plan(
            plan, pairs, clients, files, concurrency=concurrency, on_progress=on_progress
        )
    return VerificationResult(files, stats, modes, unsafe)


async def _reverify_modes(clients: dict[str, VerifierClient]) -> dict[str, str]:
    names = sorted(clients)
    try:
        modes = await asyncio.gather(*(clients[name].reverify_mode() for name in names))
    except ConnectionError as exc:
        raise ReverifyError(f"cannot reach a resources server: {exc}") from exc
    return dict(zip(names, modes, strict=True))
