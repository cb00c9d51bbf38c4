"""Which resources servers a config declares, and which server verifies each row.

Routing follows NeMo Gym: a row's ``task_source`` naming a server block wins; else its
``_ng_environment_server`` through that block's agent; else ``agent_ref.name`` through the agent
blocks; with no agent blocks and exactly one resources server, every row goes to it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from reverify_assets.errors import ReverifyError

RESOURCES_SERVERS = "resources_servers"
AGENTS = "responses_api_agents"
MODELS = "responses_api_models"
REPLICAS_FIELD = "replicas"  # how many copies of the server run (``pipeline.replication``)


@dataclass(frozen=True)
class ServerBlock:
    instance: str  # the top-level name, e.g. "mcqa"
    type: str  # the implementation, e.g. "mcqa"
    fields: Mapping[str, Any]
    kind: str = RESOURCES_SERVERS  # or MODELS: a model server a resources server calls (a judge's)

    @property
    def url(self) -> str | None:
        url = self.fields.get("url")
        return str(url).rstrip("/") if url else None

    @property
    def replicas_asked(self) -> int:
        """The copies the block asks for (1 when it does not say; ``check_replicas_field`` vets the value)."""
        given = self.fields.get(REPLICAS_FIELD)
        return given if isinstance(given, int) and not isinstance(given, bool) and given > 1 else 1

    @property
    def config_path(self) -> str:
        return f"{self.instance}.{self.kind}.{self.type}"

    def referenced_models(self, config: Mapping[str, Any]) -> list[ServerBlock]:
        """The model server blocks of ``config`` this block names, as NeMo Gym's judge servers do
        (``judge_model_server: {type: responses_api_models, name: policy_model}``), in field order."""
        found = []
        for value in self.fields.values():
            if isinstance(value, Mapping) and value.get("type") == MODELS:
                name = str(value.get("name"))
                model = declared_block(name, config.get(name))
                if model is not None and model.kind == MODELS:
                    found.append(model)
        return found


def declared_block(instance: str, value: Any) -> ServerBlock | None:
    """The server block of ``<instance>: {<kind>: {<implementation>: fields}}``, or None for any other value."""
    if not isinstance(value, Mapping) or len(value) != 1:
        return None
    ((kind, implementations),) = value.items()
    if not isinstance(implementations, Mapping) or len(implementations) != 1:
        return None
    ((implementation, fields),) = implementations.items()
    return ServerBlock(instance, str(implementation), fields, str(kind)) if isinstance(fields, Mapping) else None


@dataclass(frozen=True)
class Topology:
    servers: dict[str, ServerBlock]
    agent_servers: dict[str, str] = field(default_factory=dict)  # agent name -> server instance
    environment_agents: dict[str, str] = field(default_factory=dict)  # environment server -> agent name

    def server_for(self, row: Mapping[str, Any]) -> str:
        task_source = row.get("task_source")
        if isinstance(task_source, str) and task_source in self.servers:
            return task_source
        if not self.agent_servers and len(self.servers) == 1:
            return next(iter(self.servers))
        agent = _agent_name(row)
        env = row.get("_ng_environment_server")
        if isinstance(env, str) and env in self.environment_agents:
            agent = self.environment_agents[env]
        if agent is not None and agent in self.agent_servers:
            return self.agent_servers[agent]
        raise ReverifyError(
            f"cannot find a resources server for row (agent_ref.name={agent!r}, task_source={task_source!r}). "
            f"Known agents: {sorted(self.agent_servers)}"
        )


def _agent_name(row: Mapping[str, Any]) -> str | None:
    agent_ref = row.get("agent_ref")
    if isinstance(agent_ref, Mapping) and isinstance(agent_ref.get("name"), str):
        return agent_ref["name"]
    return None


def read_topology(config: Mapping[str, Any]) -> Topology:
    servers: dict[str, ServerBlock] = {}
    agent_servers: dict[str, str] = {}
    environment_agents: dict[str, str] = {}
    for instance, block in config.items():
        if not isinstance(block, Mapping):
            continue  # a top-level knob such as merge_shards
        for server_type, implementations in block.items():
            if not isinstance(implementations, Mapping) or len(implementations) != 1:
                continue
            implementation, fields = next(iter(implementations.items()))
            if not isinstance(fields, Mapping):
                raise ReverifyError(f"config: {instance}.{server_type}.{implementation} must be a mapping")
            if server_type == RESOURCES_SERVERS:
                servers[instance] = ServerBlock(instance, implementation, fields)
            elif (target := _referenced_name(fields.get("resources_server"))) is not None:
                agent_servers[instance] = target
            elif (agent := _referenced_name(fields.get("agent_server"))) is not None:
                environment_agents[instance] = agent
    if not servers:
        raise ReverifyError("config declares no resources server (a block `<name>: {resources_servers: {...}}`)")
    for agent, target in agent_servers.items():
        if target not in servers:
            raise ReverifyError(
                f"config: agent {agent!r} names resources server {target!r}, which the config does not declare"
            )
    if len(servers) > 1 and not agent_servers:
        raise ReverifyError(
            f"config declares several resources servers {sorted(servers)} and no agent blocks to route rows by"
        )
    return Topology(servers, agent_servers, environment_agents)


def _referenced_name(reference: Any) -> str | None:
    if isinstance(reference, Mapping) and isinstance(reference.get("name"), str):
        return reference["name"]
    if isinstance(reference, str):
        return reference
    return None
