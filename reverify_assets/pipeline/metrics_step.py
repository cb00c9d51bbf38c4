"""One aggregation step: spool the rows, start the servers they need, write the metrics file."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from reverify_assets.lib.jsonl import write_json_atomic
from reverify_assets.pipeline.aggregation import GroupSpool, aggregate_spools, spool_groups
from reverify_assets.pipeline.preparation import VerifierSetup
from reverify_assets.pipeline.verification import client_session
from reverify_assets.verifier.client import VerifierClient
from reverify_assets.verifier.launcher import ServerFleet
from reverify_assets.verifier.retry import RetryPolicy


def run_aggregation(
    rows: Iterable[dict[str, Any]], setup: VerifierSetup, metrics_path: Path
) -> list[dict[str, Any]] | None:
    """The metrics entries written to ``metrics_path``; None (and no file) when no row has a run label."""
    spools = spool_groups(rows, setup.topology)
    if not spools:
        return None
    blocks = [setup.topology.servers[name] for name in sorted({spool.server for spool in spools})]
    with ServerFleet(blocks) as urls:
        entries = asyncio.run(_aggregate(spools, urls))
    write_json_atomic(metrics_path, entries)
    return entries


async def _aggregate(spools: list[GroupSpool], urls: dict[str, str]) -> list[dict[str, Any]]:
    async with client_session(1) as session:
        clients = {name: VerifierClient(name, url, session, RetryPolicy()) for name, url in urls.items()}
        return await aggregate_spools(spools, clients)
