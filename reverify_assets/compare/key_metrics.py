"""Each side's ``key_metrics`` per agent, and their change.

A side's metrics come from its ``<stem>_aggregate_metrics.json`` when there is one (whatever server wrote
it); otherwise they are computed here from the side's rows, streamed in key order through NeMo Gym's maths
(``MetricsAccumulator``) with the hooks of the server ``--config`` routes each agent to, or NeMo Gym's
default metrics (every ``mean/*``) without a config. The report says which.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import ijson
from pydantic import BaseModel, ConfigDict

from reverify_assets.config.topology import Topology
from reverify_assets.errors import InputError
from reverify_assets.files.names import aggregate_metrics_path
from reverify_assets.metrics.accumulator import MetricsAccumulator
from reverify_assets.rows.result_routing import agent_name, run_label
from reverify_assets.servers.protocol import MetricsHooks
from reverify_assets.servers.registry import builtin_metrics_hooks

KeyMetrics = dict[str, float | None]  # metric -> value
GROUP_ENTRIES = "group_level_metrics"


class KeyMetricsSource(BaseModel):
    model_config = ConfigDict(frozen=True)

    kind: Literal["file", "computed"]
    detail: str  # the file, or the hooks the rows were computed with


class KeyMetricChange(BaseModel):
    model_config = ConfigDict(frozen=True)

    metric: str
    baseline: float | None  # None: the side has no such metric (or it is not a number)
    candidate: float | None
    delta: float | None  # candidate − baseline, when both are numbers


class AgentKeyMetrics(BaseModel):
    model_config = ConfigDict(frozen=True)

    agent: str
    baseline_rows: int  # the agent's rows in each side's output, which its metrics describe
    candidate_rows: int
    changes: list[KeyMetricChange]


class KeyMetricsComparison(BaseModel):
    model_config = ConfigDict(frozen=True)

    baseline_source: KeyMetricsSource
    candidate_source: KeyMetricsSource
    agents: list[AgentKeyMetrics]


@dataclass(frozen=True)
class HookChoice:
    """Which server's hooks compute an agent's metrics: ``--config``'s routing, else none (NeMo Gym's
    default metrics)."""

    topology: Topology | None
    config_names: str = ""

    def for_row(self, row: dict[str, Any]) -> tuple[MetricsHooks, str]:
        if self.topology is None:
            return MetricsHooks(), "NeMo Gym's default metrics (no --config)"
        server = self.topology.servers[self.topology.server_for(row)]
        hooks = builtin_metrics_hooks(server)
        if hooks is None:
            return MetricsHooks(), (
                f"NeMo Gym's default metrics: server {server.instance!r} of {self.config_names} is reached by url, "
                "so its own metrics are unknown here"
            )
        return hooks, f"the hooks of built-in {server.type!r} server {server.instance!r} of {self.config_names}"


class SideKeyMetrics:
    """Takes every row of one side in key order; then its key metrics by agent, and where they came from."""

    def __init__(self, output: Path, hooks: HookChoice) -> None:
        metrics_file = aggregate_metrics_path(output)
        self._file = metrics_file if metrics_file.exists() else None
        self._hooks = hooks
        self._accumulators: dict[str, MetricsAccumulator] = {}
        self._hook_notes: dict[str, None] = {}  # in order of first use
        self._agents_of_label: dict[str, set[str]] = {}
        self.rows_by_agent: Counter[str] = Counter()

    def add(self, row: dict[str, Any]) -> None:
        label = run_label(row)
        if label is None:  # NeMo Gym's aggregation skips such rows too
            return
        agent = agent_name(row) or label
        self.rows_by_agent[agent] += 1
        if self._file is not None:
            self._agents_of_label.setdefault(label, set()).add(agent)
            return
        accumulator = self._accumulators.get(agent)
        if accumulator is None:
            hooks, note = self._hooks.for_row(row)
            accumulator = self._accumulators[agent] = hooks.accumulator()
            self._hook_notes[note] = None
        try:
            accumulator.add(row)
        except ValueError as exc:
            raise InputError(f"key metrics of agent {agent!r}: {exc}") from exc

    @property
    def source(self) -> KeyMetricsSource:
        if self._file is not None:
            return KeyMetricsSource(kind="file", detail=str(self._file))
        notes = "; ".join(self._hook_notes) or "no row carries an agent name"
        return KeyMetricsSource(kind="computed", detail=f"computed from the rows with {notes}")

    def by_agent(self) -> dict[str, KeyMetrics]:
        if self._file is not None:
            return {self._agent_of_entry(name): metrics for name, metrics in read_metrics_file(self._file).items()}
        # The answer's group entries (one a task) stay in the accumulator's spool: only key_metrics is wanted.
        with open(os.devnull, "wb") as sink:
            return {
                agent: _numbers(accumulator.write_answer(sink, drop=(GROUP_ENTRIES,)).get("key_metrics"))
                for agent, accumulator in self._accumulators.items()
            }

    def close(self) -> None:
        for accumulator in self._accumulators.values():
            accumulator.close()

    def _agent_of_entry(self, name: str) -> str:
        """NeMo Gym names an entry by its rows' environment server when they have one: the agent of those
        rows, when there is exactly one, so that both sides' entries of an agent meet."""
        if name in self.rows_by_agent:
            return name
        agents = self._agents_of_label.get(name, set())
        return next(iter(agents)) if len(agents) == 1 else name


def read_metrics_file(path: Path) -> dict[str, KeyMetrics]:
    """``key_metrics`` by entry name (``agent_ref.name``) of NeMo Gym's metrics file.

    Streamed: each entry's ``group_level_metrics`` (one record a task, hundreds of megabytes for a million
    rows) is parsed past, never built.
    """
    entries: list[tuple[str | None, KeyMetrics | None]] = []
    try:
        with open(path, "rb") as fh:
            _collect_entries(ijson.parse(fh, use_float=True), entries)
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}", path=path) from exc
    except ijson.JSONError as exc:
        raise InputError(f"{path}: malformed JSON: {exc}", path=path) from exc
    except _NotAList as exc:
        raise InputError(f"{path}: expected a JSON list of metrics entries, found {exc}", path=path) from exc
    by_name: dict[str, KeyMetrics] = {}
    for position, (name, metrics) in enumerate(entries, start=1):
        if name is None:
            raise InputError(f"{path}: entry {position} has no `agent_ref.name`", path=path)
        by_name[name] = metrics or {}
    return by_name


class _NotAList(Exception):
    """The top-level JSON value is not a list (its JSON type is the message)."""


TOP_LEVEL_TYPES = {"start_map": "dict", "string": "str", "number": "float", "boolean": "bool", "null": "NoneType"}


def _collect_entries(
    events: Iterator[tuple[str, str, Any]], entries: list[tuple[str | None, KeyMetrics | None]]
) -> None:
    """(name, key metrics) of each entry of the list, in order; a non-object entry gives (None, None)."""
    name: str | None = None
    metrics: KeyMetrics | None = None
    metric_prefix, metric = "", ""
    for prefix, event, value in events:
        if prefix == "":
            if event != "start_array" and event != "end_array":
                raise _NotAList(TOP_LEVEL_TYPES.get(event, event))
        elif prefix == "item":
            if event == "start_map":
                name, metrics = None, {}
            elif event == "end_map":
                entries.append((name, metrics))
            elif event not in ("map_key", "end_array"):
                entries.append((None, None))
        elif prefix == "item.agent_ref.name":
            name = value if event == "string" else None
        elif prefix == "item.key_metrics":
            if event == "map_key" and metrics is not None:
                # Until a number arrives, the metric has no value (an object or a string stays None).
                metric, metric_prefix = value, f"item.key_metrics.{value}"
                metrics[metric] = None
        elif prefix == metric_prefix and event == "number" and metrics is not None:
            metrics[metric] = float(value)


def _numbers(metrics: Any) -> KeyMetrics:
    if not isinstance(metrics, dict):
        return {}
    return {
        name: float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
        for name, value in metrics.items()
    }


def compare_key_metrics(
    baseline: SideKeyMetrics, candidate: SideKeyMetrics, agents_in_order: Sequence[str]
) -> KeyMetricsComparison:
    """Every agent either side has metrics for (``agents_in_order`` first), every metric either side has."""
    left, right = baseline.by_agent(), candidate.by_agent()
    agents = [agent for agent in dict.fromkeys([*agents_in_order, *left, *right]) if agent in left or agent in right]
    return KeyMetricsComparison(
        baseline_source=baseline.source,
        candidate_source=candidate.source,
        agents=[
            AgentKeyMetrics(
                agent=agent,
                baseline_rows=baseline.rows_by_agent[agent],
                candidate_rows=candidate.rows_by_agent[agent],
                changes=_changes(left.get(agent, {}), right.get(agent, {})),
            )
            for agent in agents
        ],
    )


def _changes(baseline: KeyMetrics, candidate: KeyMetrics) -> list[KeyMetricChange]:
    changes = []
    for metric in dict.fromkeys([*baseline, *candidate]):
        before, after = baseline.get(metric), candidate.get(metric)
        delta = after - before if before is not None and after is not None else None
        changes.append(KeyMetricChange(metric=metric, baseline=before, candidate=after, delta=delta))
    return changes
