"""Aggregate metrics: output rows grouped by run label and server, each group sent in one request.

Rows are stripped (no prompt, ``response`` reduced to its usage) and spooled to a temporary file
per group as they stream past, so the client never holds a run's rows in memory; the server
needs them all at once, as NeMo Gym's protocol sends them.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import IO, Any

import orjson

from reverify_assets.config.topology import Topology
from reverify_assets.lib.result_routing import agent_name, run_label
from reverify_assets.metrics.aggregate import baseline_metrics
from reverify_assets.verifier.client import VerifierClient

NOT_SENT_TO_AGGREGATION = (
    "responses_create_params",
    "ng_agent_observations",
    "ng_model_call_capture",
    "ng_trajectory",
)


def strip_for_aggregation(row: dict[str, Any]) -> dict[str, Any]:
    stripped = {name: value for name, value in row.items() if name not in NOT_SENT_TO_AGGREGATION}
    response = row.get("response")
    if isinstance(response, Mapping):
        stripped["response"] = {"usage": response.get("usage")}
    return stripped


@dataclass
class GroupSpool:
    agent: str
    server: str
    body: IO[bytes] = field(default_factory=lambda: tempfile.TemporaryFile())
    rows: int = 0
    labels: set[str] = field(default_factory=set)

    @property
    def label(self) -> str:
        environments = self.labels - {self.agent}
        return next(iter(environments)) if len(environments) == 1 else self.agent

    def add(self, row: dict[str, Any]) -> None:
        self.body.write(b'{"verify_responses":[' if self.rows == 0 else b",")
        self.body.write(orjson.dumps(row))
        self.rows += 1

    def finish(self) -> IO[bytes]:
        """The finished body, on a handle of its own: aiohttp closes what it uploads, and a server
        without /aggregate_metrics means we read the rows back afterwards."""
        self.body.write(b"]}")
        self.body.flush()
        self.body.seek(0)
        return os.fdopen(os.dup(self.body.fileno()), "rb")

    def read_rows(self) -> list[dict[str, Any]]:
        self.body.seek(0)
        rows = orjson.loads(self.body.read())["verify_responses"]
        self.body.seek(0)
        return rows


def spool_groups(rows: Iterable[dict[str, Any]], topology: Topology) -> list[GroupSpool]:
    """Groups in order of first appearance; rows without a run label are skipped, as NeMo Gym does.

    Rows group by agent (and server), not by NeMo Gym's run label directly: seeded rows carry the
    collection's ``_ng_environment_server`` while recovered rows do not, and one agent's metrics
    must not split in two. The entry is named by the environment server when its rows agree on one.
    """
    groups: dict[tuple[str, str], GroupSpool] = {}
    for row in rows:
        label = run_label(row)
        if label is None:
            continue
        agent = agent_name(row) or label
        server = topology.server_for(row)
        group = groups.get((agent, server))
        if group is None:
            group = groups[(agent, server)] = GroupSpool(agent, server)
        group.labels.add(label)
        group.add(strip_for_aggregation(row))
    return list(groups.values())


async def aggregate_spools(spools: list[GroupSpool], clients: Mapping[str, VerifierClient]) -> list[dict[str, Any]]:
    entries = []
    for spool in spools:
        try:
            with spool.finish() as body:
                metrics = await clients[spool.server].aggregate_metrics(body)
            if metrics is None:  # the server has no /aggregate_metrics: our own baseline statistics
                metrics = baseline_metrics(spool.read_rows())
        finally:
            spool.body.close()
        metrics.pop("perf_summary", None)
        entries.append({"agent_ref": {"name": spool.label}, **metrics})
    return entries
