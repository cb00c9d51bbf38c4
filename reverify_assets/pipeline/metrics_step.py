"""One aggregation step: group the rows, ask the remote servers that need asking, write the metrics file."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from functools import partial
from pathlib import Path
from typing import Any

import orjson

from reverify_assets.lib.jsonl import AtomicWriter
from reverify_assets.lib.verifier_wire import RetryPolicy
from reverify_assets.metrics.aggregate import empty_answer
from reverify_assets.metrics.coverage import COVERAGE_FIELD, PROVENANCE_BLOCK_FIELD, provenance_block
from reverify_assets.pipeline.aggregation import (
    NOT_IN_SUMMARY,
    LocalGroup,
    RemoteGroup,
    collect_groups,
    entry_label,
    group_of,
    remote_answers,
)
from reverify_assets.pipeline.coverage_count import CoverageSources, CoverageTally, GroupCoverage
from reverify_assets.pipeline.preparation import VerifierSetup
from reverify_assets.pipeline.verification import client_session
from reverify_assets.verifier.client import VerifierClient
from reverify_assets.verifier.launcher import PrestartedServers, ServerFleet

GROUP_LEVEL_METRICS = "group_level_metrics"
UNKNOWN_PLAN = CoverageSources()  # no sidecar, expected keys unknown


def run_aggregation(
    rows: Iterable[dict[str, Any]],
    setup: VerifierSetup,
    metrics_path: Path,
    coverage: CoverageSources = UNKNOWN_PLAN,
    prestarted: PrestartedServers | None = None,
) -> list[dict[str, Any]] | None:
    """Writes ``metrics_path``, NeMo Gym's list of one entry per agent, each followed by its ``coverage`` and
    ``provenance`` blocks (see ``metrics.coverage``); returns those entries without their
    ``group_level_metrics`` (one per task: the file has them). An agent whose rows all failed (or are all
    missing) still has an entry: NeMo Gym's answer to no rows, and its coverage. None (and no file) when no
    row, scored, failed or missing, has a run label. ``prestarted``: servers to borrow for the remote groups.
    """
    tally = CoverageTally(coverage, partial(group_of, topology=setup.topology))
    groups: list[LocalGroup | RemoteGroup] = []
    try:
        groups = collect_groups(rows, setup.topology, tally)
        covered = tally.finish()
        scored = {group.key for group in groups}
        unscored = sorted(
            (key for key in covered if key not in scored),
            key=lambda key: (entry_label(key[0], covered[key].labels), key[0], key[1] or ""),
        )
        if not groups and not unscored:
            return None
        remote = [group for group in groups if isinstance(group, RemoteGroup)]
        answers = dict(zip(map(id, remote), _ask_remote(remote, setup, prestarted), strict=True))
        summaries = []
        with AtomicWriter(metrics_path) as fp:
            fp.write(b"[")
            for position, group in enumerate(groups):
                fp.write(b",\n" if position else b"")
                blocks = _blocks(covered[group.key])
                if isinstance(group, LocalGroup):
                    summaries.append(group.write_entry(fp, suffix_fields=blocks))
                else:
                    entry = {**answers[id(group)], **blocks}
                    fp.write(orjson.dumps(entry))
                    summaries.append({name: value for name, value in entry.items() if name != GROUP_LEVEL_METRICS})
            for position, key in enumerate(unscored, start=len(groups)):
                fp.write(b",\n" if position else b"")
                entry = _unscored_entry(entry_label(key[0], covered[key].labels), covered[key])
                fp.write(orjson.dumps(entry))
                summaries.append({name: value for name, value in entry.items() if name != GROUP_LEVEL_METRICS})
            fp.write(b"]\n")
    finally:
        tally.close()
        for group in groups:
            group.close()
    return summaries


def _blocks(covered: GroupCoverage) -> dict[str, Any]:
    return {COVERAGE_FIELD: covered.coverage.block(), PROVENANCE_BLOCK_FIELD: provenance_block(covered.rows_by_config)}


def _unscored_entry(label: str, covered: GroupCoverage) -> dict[str, Any]:
    """NeMo Gym's answer to no verify responses, for an agent none of whose rows was scored."""
    answer = {name: value for name, value in empty_answer().items() if name != NOT_IN_SUMMARY}
    return {"agent_ref": {"name": label}, **answer, **_blocks(covered)}


def _ask_remote(
    groups: list[RemoteGroup], setup: VerifierSetup, prestarted: PrestartedServers | None
) -> list[dict[str, Any]]:
    if not groups:
        return []
    blocks = [setup.topology.servers[name] for name in sorted({group.server for group in groups})]
    with ServerFleet(blocks, setup.config, prestarted) as urls:
        return asyncio.run(_ask(groups, urls))


async def _ask(groups: list[RemoteGroup], urls: dict[str, str]) -> list[dict[str, Any]]:
    async with client_session(1) as session:
        clients = {name: VerifierClient(name, url, session, RetryPolicy()) for name, url in urls.items()}
        return await remote_answers(groups, clients)
