"""One aggregation step: group the rows, ask the remote servers that need asking, write the metrics file."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson

from reverify_assets.lib.jsonl import AtomicWriter
from reverify_assets.pipeline.aggregation import LocalGroup, RemoteGroup, collect_groups, remote_answers
from reverify_assets.pipeline.preparation import VerifierSetup
from reverify_assets.pipeline.verification import client_session
from reverify_assets.verifier.client import VerifierClient
from reverify_assets.verifier.launcher import ServerFleet
from reverify_assets.verifier.retry import RetryPolicy

GROUP_LEVEL_METRICS = "group_level_metrics"


def run_aggregation(
    rows: Iterable[dict[str, Any]], setup: VerifierSetup, metrics_path: Path
) -> list[dict[str, Any]] | None:
    """Writes ``metrics_path``, NeMo Gym's list of one entry per agent; returns those entries without their
    ``group_level_metrics`` (one per task: the file has them). None (and no file) when no row has a run label.
    """
    groups = collect_groups(rows, setup.topology)
    if not groups:
        return None
    try:
        remote = [group for group in groups if isinstance(group, RemoteGroup)]
        answers = dict(zip(map(id, remote), _ask_remote(remote, setup), strict=True))
        summaries = []
        with AtomicWriter(metrics_path) as fp:
            fp.write(b"[")
            for position, group in enumerate(groups):
                fp.write(b",\n" if position else b"")
                if isinstance(group, LocalGroup):
                    summaries.append(group.write_entry(fp))
                else:
                    entry = answers[id(group)]
                    fp.write(orjson.dumps(entry))
                    summaries.append({name: value for name, value in entry.items() if name != GROUP_LEVEL_METRICS})
            fp.write(b"]\n")
    finally:
        for group in groups:
            group.close()
    return summaries


def _ask_remote(groups: list[RemoteGroup], setup: VerifierSetup) -> list[dict[str, Any]]:
    if not groups:
        return []
    blocks = [setup.topology.servers[name] for name in sorted({group.server for group in groups})]
    with ServerFleet(blocks) as urls:
        return asyncio.run(_ask(groups, urls))


async def _ask(groups: list[RemoteGroup], urls: dict[str, str]) -> list[dict[str, Any]]:
    async with client_session(1) as session:
        clients = {name: VerifierClient(name, url, session, RetryPolicy()) for name, url in urls.items()}
        return await remote_answers(groups, clients)
