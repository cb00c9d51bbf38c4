"""Aggregate metrics: output rows grouped by run label and server, one metrics entry per group.

Rows are stripped (no prompt, ``response`` reduced to its usage) as they stream past. A built-in server's
group is computed here, row by row, with the server's own hooks (``MetricsAccumulator``): no server to
start, and memory of a few bytes a row. So is a group of one of NeMo Gym's servers that the CLI started, but for
the hooks it overrides, which it runs itself over the rows streamed to it (``verifier.server_metrics``). A
group of any other server (reached by ``url``, say) is spooled to a temporary file and sent in one
``/aggregate_metrics`` request, as NeMo Gym's protocol wants; the client never holds those rows either.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import IO, Any

import orjson

from reverify_assets.config.topology import Topology
from reverify_assets.errors import InputError, ReverifyError
from reverify_assets.files.positional_reader import PositionalReader
from reverify_assets.metrics.accumulator import MetricsAccumulator
from reverify_assets.metrics.names import MASK_SAMPLE
from reverify_assets.rows.result_routing import agent_name, run_label
from reverify_assets.rows.row_fields import strip_for_aggregation
from reverify_assets.run.coverage_count import CoverageTally, GroupKey
from reverify_assets.servers.protocol import MetricsHooks
from reverify_assets.servers.registry import builtin_metrics_hooks
from reverify_assets.verifier.client import VerifierClient
from reverify_assets.verifier.server_metrics import RowsToServer, ServerHooks

# Popped from every entry, as NeMo Gym's reverify does: rollouts re-read from disk carry no timing.
NOT_IN_SUMMARY = "perf_summary"


@dataclass
class AgentGroup:
    agent: str
    server: str
    rows: int = 0
    labels: set[str] = field(default_factory=set)

    @property
    def label(self) -> str:
        return entry_label(self.agent, self.labels)

    @property
    def key(self) -> GroupKey:
        return self.agent, self.server

    def add(self, row: dict[str, Any]) -> None:
        self.rows += 1

    def close(self) -> None:
        """Release what the group holds (a spool, a temporary file of group entries)."""


@dataclass
class LocalGroup(AgentGroup):
    """A group whose metrics are computed here as the rows stream past, in key order: a built-in server's, or that of
    one of NeMo Gym's servers whose hooks are NeMo Gym's defaults (the base of one whose hooks are its own)."""

    accumulator: MetricsAccumulator = field(default_factory=MetricsAccumulator)
    computed: str = "here"  # where, for the run's summary

    def add(self, row: dict[str, Any]) -> None:
        super().add(row)
        try:
            self.accumulator.add(row)
        except ValueError as exc:
            raise InputError(f"aggregate metrics of {self.agent!r}: {exc}") from exc

    def write_entry(self, fp: IO[bytes], suffix_fields: Mapping[str, Any] | None = None) -> dict[str, Any]:
        label = {"agent_ref": {"name": self.label}}
        return self.accumulator.write_answer(
            fp, prefix_fields=label, drop=(NOT_IN_SUMMARY,), suffix_fields=suffix_fields
        )

    def close(self) -> None:
        self.accumulator.close()


@dataclass
class ServerHooksGroup(LocalGroup):
    """A group of one of NeMo Gym's servers whose hooks read the rows: computed here as a local group is, the rows
    streamed to the server as they pass, for its hooks to run on."""

    rows_to_server: RowsToServer | None = None

    @classmethod
    def of(cls, agent: str, server: str, hooks: ServerHooks) -> ServerHooksGroup:
        rows = RowsToServer(hooks) if hooks.reads_rows() else None
        computed = f"here, {' and '.join(hooks.in_order())} by the server"
        return cls(agent, server, accumulator=hooks.accumulator(rows), computed=computed, rows_to_server=rows)

    def add(self, row: dict[str, Any]) -> None:
        # Masked rows are no hook's (NeMo Gym's route gives its hooks the scored rows only).
        if self.rows_to_server is not None and not row.get(MASK_SAMPLE):
            self.rows_to_server.add(orjson.dumps(row, option=orjson.OPT_APPEND_NEWLINE))
        super().add(row)

    def close(self) -> None:
        super().close()
        if self.rows_to_server is not None:
            self.rows_to_server.close()


@dataclass
class RemoteGroup(AgentGroup):
    """A group for a server reached by ``url``: spooled as one ``{"verify_responses": [...]}`` body."""

    body: IO[bytes] = field(default_factory=lambda: tempfile.TemporaryFile())

    @property
    def computed(self) -> str:
        return "by its /aggregate_metrics"

    def add(self, row: dict[str, Any]) -> None:
        self.body.write(b'{"verify_responses":[' if self.rows == 0 else b",")
        self.body.write(orjson.dumps(row))
        super().add(row)

    def finish(self) -> None:
        self.body.write(b"]}")
        self.body.flush()

    def open_body(self) -> PositionalReader:
        """The finished body from its first byte, on a reader of its own: each attempt to send it starts afresh,
        and closing the reader (aiohttp closes what it uploads) leaves the spool open to read the rows back."""
        return PositionalReader(self.body.fileno())

    def read_rows(self) -> list[dict[str, Any]]:
        self.body.seek(0)
        rows = orjson.loads(self.body.read())["verify_responses"]
        self.body.seek(0)
        return rows

    def close(self) -> None:
        self.body.close()


def entry_label(agent: str, labels: set[str]) -> str:
    """An entry is named by the environment server when its rows agree on one, else by the agent."""
    environments = labels - {agent}
    return next(iter(environments)) if len(environments) == 1 else agent


def group_of(row: dict[str, Any], topology: Topology) -> tuple[GroupKey, str] | None:
    """The group a failed or missing row would have joined, and its run label (None: no run label)."""
    label = run_label(row)
    if label is None:
        return None
    try:
        server: str | None = topology.server_for(row)
    except ReverifyError:
        server = None  # a failure the config cannot route still counts, in an entry of its own
    return (agent_name(row) or label, server), label


NewGroup = Callable[[str, str], "LocalGroup | RemoteGroup"]


def collect_groups(
    rows: Iterable[dict[str, Any]],
    topology: Topology,
    tally: CoverageTally | None = None,
    new_group: NewGroup | None = None,
) -> list[LocalGroup | RemoteGroup]:
    """Groups in order of first appearance; rows without a run label are skipped, as NeMo Gym does.

    Rows group by agent (and server), not by NeMo Gym's run label directly: seeded rows carry the
    collection's ``_ng_environment_server`` while recovered rows do not, and one agent's metrics
    must not split in two. The entry is named by the environment server when its rows agree on one.
    Rows come in key order (an output file, or shards merged by key), as a local group needs them.
    ``tally`` counts every row as scored, for the entries' coverage. ``new_group(agent, server)`` makes a group: by
    default a local one for a built-in server, else a remote one.
    """
    make_group = new_group or partial(builtin_or_remote_group, topology=topology)
    groups: dict[tuple[str, str], LocalGroup | RemoteGroup] = {}
    try:
        for row in rows:
            label = run_label(row)
            if label is None:
                if tally is not None:
                    tally.add(row, None)
                continue
            agent = agent_name(row) or label
            server = topology.server_for(row)
            group = groups.get((agent, server))
            if group is None:
                group = groups[(agent, server)] = make_group(agent, server)
            group.labels.add(label)
            if tally is not None:
                tally.add(row, (agent, server))
            group.add(strip_for_aggregation(row))
    except BaseException:
        for group in groups.values():
            group.close()
        raise
    return list(groups.values())


def builtin_or_remote_group(agent: str, server: str, topology: Topology) -> LocalGroup | RemoteGroup:
    hooks = builtin_metrics_hooks(topology.servers[server])
    if hooks is None:
        return RemoteGroup(agent, server)
    return LocalGroup(agent, server, accumulator=hooks.accumulator())


async def remote_answers(groups: list[RemoteGroup], clients: Mapping[str, VerifierClient]) -> list[dict[str, Any]]:
    """Each group's answer from its server, or our own baseline when the server has no /aggregate_metrics."""
    answers = []
    for group in groups:
        group.finish()
        metrics = await clients[group.server].aggregate_metrics(group.open_body)
        if metrics is None:
            metrics = MetricsHooks().answer(group.read_rows())
        metrics.pop(NOT_IN_SUMMARY, None)
        answers.append({"agent_ref": {"name": group.label}, **metrics})
    return answers
