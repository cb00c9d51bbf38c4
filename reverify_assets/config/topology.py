"""Which resources servers a config declares, and which server verifies each row.

Routing follows NeMo Gym: a row's ``task_source`` naming a server block wins; else its
``_ng_environment_server`` through that block's agent; else ``agent_ref.name`` through the agent
blocks; with no agent blocks and exactly one resources server, every row goes to it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from difflib import get_close_matches
from typing import Any

from reverify_assets.config.server_url import url_problem
from reverify_assets.config.sources import UNTRACKED, ConfigSources
from reverify_assets.errors import ConfigError

RESOURCES_SERVERS = "resources_servers"
AGENTS = "responses_api_agents"
MODELS = "responses_api_models"
ENVIRONMENTS = "environment_servers"
# NeMo Gym's kinds of server block (nemo_gym/config_types.py, is_almost_server).
SERVER_KINDS = (RESOURCES_SERVERS, AGENTS, MODELS, ENVIRONMENTS)
REPLICAS_FIELD = "replicas"  # how many copies of the server run (``run.replication``)
URL_FIELD = "url"  # a running server's: nothing is started for the block


@dataclass(frozen=True)
class ServerBlock:
    instance: str  # the top-level name, e.g. "mcqa"
    type: str  # the implementation, e.g. "mcqa"
    fields: Mapping[str, Any]
    kind: str = RESOURCES_SERVERS  # or MODELS: a model server a resources server calls (a judge's)
    # Who set each field, for errors to name (``named``); equal blocks are equal wherever they were set.
    sources: ConfigSources = field(default=UNTRACKED, compare=False, repr=False)

    def __post_init__(self) -> None:
        url = self.fields.get(URL_FIELD)
        if url not in (None, "") and (problem := url_problem(url)) is not None:
            raise ConfigError(
                f"config: {self.named(URL_FIELD)} is {url!r}; {problem}",
                key=self.config_key(URL_FIELD),
                source=self.set_by(URL_FIELD),
            )

    @property
    def url(self) -> str | None:
        url = self.fields.get(URL_FIELD)
        return str(url).rstrip("/") if url else None

    @property
    def replicas_asked(self) -> int:
        """The copies the block asks for (1 when it does not say; ``check_replicas_field`` vets the value)."""
        given = self.fields.get(REPLICAS_FIELD)
        return given if isinstance(given, int) and not isinstance(given, bool) and given > 1 else 1

    def named(self, *keys: str | int) -> str:
        """The block's path, or a field's below it, in backticks with the file or override that set it."""
        return self.sources.name([self.instance, self.kind, self.type, *keys])

    def config_key(self, *keys: str | int) -> str:
        """The block's dotted path, or a field's below it, for an error's ``key``."""
        return ".".join(map(str, [self.instance, self.kind, self.type, *keys]))

    def set_by(self, *keys: str | int) -> str | None:
        """The file or override that set the block, or a field below it, for an error's ``source``."""
        return self.sources.set_by([self.instance, self.kind, self.type, *keys])

    def referenced_models(self, config: Mapping[str, Any]) -> list[ServerBlock]:
        """The model server blocks of ``config`` this block names, as NeMo Gym's judge servers do
        (``judge_model_server: {type: responses_api_models, name: policy_model}``), in field order."""
        return [model for _, _, model in self._model_references(config) if model is not None]

    def undeclared_models(self, config: Mapping[str, Any]) -> list[tuple[str, str]]:
        """``(field, model)`` for each model server this block names that ``config`` does not declare. NeMo Gym refuses
        such a config; a server whose judge is off (polymath's ``should_use_judge: false``) never calls it."""
        return [(key, name) for key, name, model in self._model_references(config) if model is None]

    def _model_references(self, config: Mapping[str, Any]) -> list[tuple[str, str, ServerBlock | None]]:
        """``(field, model name, its block or None)`` for each field naming a model server."""
        found = []
        for key, value in self.fields.items():
            if isinstance(value, Mapping) and value.get("type") == MODELS:
                name = str(value.get("name"))
                model = declared_block(name, config.get(name), self.sources)
                found.append((str(key), name, model if model is not None and model.kind == MODELS else None))
        return found


def declared_block(instance: str, value: Any, sources: ConfigSources = UNTRACKED) -> ServerBlock | None:
    """The server block of ``<instance>: {<kind>: {<implementation>: fields}}``, or None for any other value."""
    if not isinstance(value, Mapping) or len(value) != 1:
        return None
    ((kind, implementations),) = value.items()
    if not isinstance(implementations, Mapping) or len(implementations) != 1:
        return None
    ((implementation, fields),) = implementations.items()
    if not isinstance(fields, Mapping):
        return None
    return ServerBlock(instance, str(implementation), fields, str(kind), sources)


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
        raise ConfigError(
            f"cannot find a resources server for row (agent_ref.name={agent!r}, task_source={task_source!r}). "
            f"Known agents: {sorted(self.agent_servers)}"
        )


def _agent_name(row: Mapping[str, Any]) -> str | None:
    agent_ref = row.get("agent_ref")
    if isinstance(agent_ref, Mapping) and isinstance(agent_ref.get("name"), str):
        return agent_ref["name"]
    return None


def read_topology(config: Mapping[str, Any], sources: ConfigSources = UNTRACKED) -> Topology:
    """``sources``: who set each value of ``config``, for the errors to name."""
    servers: dict[str, ServerBlock] = {}
    agent_servers: dict[str, str] = {}
    agent_references: dict[str, list[str]] = {}  # agent -> the path of the server it names
    environment_agents: dict[str, str] = {}
    for instance, block in config.items():
        if not isinstance(block, Mapping):
            continue  # a top-level knob such as merge_shards
        _check_kinds(instance, block, sources)
        for server_type, implementations in block.items():
            if not isinstance(implementations, Mapping) or len(implementations) != 1:
                continue
            implementation, fields = next(iter(implementations.items()))
            path = [instance, server_type, implementation]
            if not isinstance(fields, Mapping):
                if server_type not in SERVER_KINDS:
                    continue  # a mapping knob of one key (`sandbox: {default_metadata: {sandbox-api: x}}`)
                raise ConfigError(
                    f"config: {sources.name(path)} must be a mapping", key=".".join(path), source=sources.set_by(path)
                )
            if server_type == RESOURCES_SERVERS:
                servers[instance] = ServerBlock(instance, implementation, fields, sources=sources)
            elif (target := _reference(fields, "resources_server")) is not None:
                agent_servers[instance], below = target
                agent_references[instance] = [*path, *below]
            elif (agent := _reference(fields, "agent_server")) is not None:
                environment_agents[instance] = agent[0]
    if not servers:
        raise ConfigError("config declares no resources server (a block `<name>: {resources_servers: {...}}`)")
    for agent, target in agent_servers.items():
        if target not in servers:
            raise ConfigError(
                f"config: {sources.name(agent_references[agent])} names resources server {target!r}, "
                f"which the config does not declare",
                key=".".join(agent_references[agent]),
                source=sources.set_by(agent_references[agent]),
            )
    if len(servers) > 1 and not agent_servers:
        raise ConfigError(
            f"config declares several resources servers and no agent blocks to route rows by: "
            f"{', '.join(block.named() for block in servers.values())}"
        )
    return Topology(servers, agent_servers, environment_agents)


def _check_kinds(instance: str, block: Mapping[str, Any], sources: ConfigSources) -> None:
    """A misspelt kind (``resource_servers``) or a second type of one block (a misspelt type in a later file,
    merged beside the first) would leave the block's server out or change it unseen: both are errors."""
    for key, value in block.items():
        # Closer than difflib's default asks: a misspelling of a kind, not a key of the user's own.
        close = get_close_matches(str(key), SERVER_KINDS, n=1, cutoff=0.8)
        if key not in SERVER_KINDS and close:
            raise ConfigError(
                f"config: {sources.name([instance, key])} is not a kind of server block (did you mean `{close[0]}`?)",
                key=f"{instance}.{key}",
                source=sources.set_by([instance, key]),
            )
        if key == RESOURCES_SERVERS and isinstance(value, Mapping) and len(value) > 1:
            raise ConfigError(
                f"config: `{instance}.{key}` declares {len(value)} servers, where a block declares one: "
                f"{', '.join(sources.name([instance, key, name]) for name in value)}",
                key=f"{instance}.{key}",
                source=sources.set_by([instance, key]),
            )


def _reference(fields: Mapping[str, Any], key: str) -> tuple[str, list[str]] | None:
    """The name another block gives under ``key`` (``{name: x}`` or ``x``) and the path below the block to it."""
    reference = fields.get(key)
    if isinstance(reference, Mapping) and isinstance(reference.get("name"), str):
        return reference["name"], [key, "name"]
    if isinstance(reference, str):
        return reference, [key]
    return None
