"""One aggregation step: group the rows, ask the servers that need asking, write the metrics file."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from contextlib import ExitStack
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import orjson

from reverify_assets.config.implementations import runs_builtin
from reverify_assets.files.jsonl import AtomicWriter
from reverify_assets.metrics.aggregate import empty_answer
from reverify_assets.metrics.coverage import COVERAGE_FIELD, PROVENANCE_BLOCK_FIELD, provenance_block
from reverify_assets.rows.verifier_wire import RetryPolicy
from reverify_assets.run.aggregation import (
    NOT_IN_SUMMARY,
    LocalGroup,
    RemoteGroup,
    ServerHooksGroup,
    builtin_or_remote_group,
    collect_groups,
    entry_label,
    group_of,
    remote_answers,
)
from reverify_assets.run.coverage_count import CoverageSources, CoverageTally, GroupCoverage
from reverify_assets.run.preparation import VerifierSetup
from reverify_assets.run.verification import client_session
from reverify_assets.verifier.client import VerifierClient
from reverify_assets.verifier.launcher import PrestartedServers, ServerFleet
from reverify_assets.verifier.server_metrics import ServerHooks, server_hooks

GROUP_LEVEL_METRICS = "group_level_metrics"
UNKNOWN_PLAN = CoverageSources()  # no sidecar, expected keys unknown


@dataclass(frozen=True)
class Aggregation:
    """The entries written, without their ``group_level_metrics`` (one per task: the file has them), and how each
    server's were computed (``"here"``, or what its server computed)."""

    entries: list[dict[str, Any]]
    computed_by: dict[str, str]


def run_aggregation(
    rows: Iterable[dict[str, Any]],
    setup: VerifierSetup,
    metrics_path: Path,
    coverage: CoverageSources = UNKNOWN_PLAN,
    prestarted: PrestartedServers | None = None,
) -> Aggregation | None:
    """Writes ``metrics_path``, NeMo Gym's list of one entry per agent, each followed by its ``coverage`` and
    ``provenance`` blocks (see ``metrics.coverage``). An agent whose rows all failed (or are all missing) still
    has an entry: NeMo Gym's answer to no rows, and its coverage. None (and no file) when no row, scored, failed
    or missing, has a run label. ``prestarted``: servers to borrow for the groups that need asking.
    """
    tally = CoverageTally(coverage, partial(group_of, topology=setup.topology))
    groups: list[LocalGroup | RemoteGroup] = []
    with MetricsServers(setup, prestarted) as servers:
        try:
            groups = collect_groups(rows, setup.topology, tally, servers.new_group)
            covered = tally.finish()
            scored = {group.key for group in groups}
            unscored = sorted(
                (key for key in covered if key not in scored),
                key=lambda key: (entry_label(key[0], covered[key].labels), key[0], key[1] or ""),
            )
            if not groups and not unscored:
                return None
            remote = [group for group in groups if isinstance(group, RemoteGroup)]
            answers = dict(zip(map(id, remote), servers.ask(remote), strict=True))
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
    return Aggregation(summaries, {group.server: group.computed for group in groups})


class MetricsServers:
    """The servers an aggregation asks, each started (or borrowed) when its first row comes, and the kind of group
    its rows make: a built-in server's is computed here; so is that of one of NeMo Gym's servers the CLI starts,
    but for the hooks it has of its own (asked of it); any other server is asked ``/aggregate_metrics``."""

    def __init__(self, setup: VerifierSetup, prestarted: PrestartedServers | None) -> None:
        self._setup, self._prestarted = setup, prestarted
        self._fleets = ExitStack()
        self._urls: dict[str, str] = {}
        self._hooks: dict[str, ServerHooks | None] = {}

    def __enter__(self) -> MetricsServers:
        return self

    def __exit__(self, *_: object) -> None:
        self._fleets.close()

    def url(self, server: str) -> str:
        if server not in self._urls:
            block = self._setup.topology.servers[server]
            fleet = ServerFleet([block], self._setup.config, self._prestarted, judge_cache=self._setup.judge_cache)
            self._urls[server] = self._fleets.enter_context(fleet)[block.instance]
        return self._urls[server]

    def new_group(self, agent: str, server: str) -> LocalGroup | RemoteGroup:
        block = self._setup.topology.servers[server]
        if block.url or runs_builtin(block):
            return builtin_or_remote_group(agent, server, self._setup.topology)
        if server not in self._hooks:
            self._hooks[server] = server_hooks(server, self.url(server))
        hooks = self._hooks[server]
        if hooks is None:
            return RemoteGroup(agent, server)
        if not hooks.overridden:
            return LocalGroup(agent, server, computed="here, its hooks NeMo Gym's defaults")
        return ServerHooksGroup.of(agent, server, hooks)

    def ask(self, groups: list[RemoteGroup]) -> list[dict[str, Any]]:
        """Each group's answer to ``/aggregate_metrics``."""
        if not groups:
            return []
        urls = {group.server: self.url(group.server) for group in groups}
        return asyncio.run(_ask(groups, urls))


def _blocks(covered: GroupCoverage) -> dict[str, Any]:
    return {COVERAGE_FIELD: covered.coverage.block(), PROVENANCE_BLOCK_FIELD: provenance_block(covered.rows_by_config)}


def _unscored_entry(label: str, covered: GroupCoverage) -> dict[str, Any]:
    """NeMo Gym's answer to no verify responses, for an agent none of whose rows was scored."""
    answer = {name: value for name, value in empty_answer().items() if name != NOT_IN_SUMMARY}
    return {"agent_ref": {"name": label}, **answer, **_blocks(covered)}


async def _ask(groups: list[RemoteGroup], urls: dict[str, str]) -> list[dict[str, Any]]:
    async with client_session(1) as session:
        clients = {name: VerifierClient(name, url, session, RetryPolicy()) for name, url in urls.items()}
        return await remote_answers(groups, clients)
