"""The resources servers this package runs itself, by the ``<type>`` name a config block uses."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path

from pydantic import BaseModel, ValidationError

from reverify_assets.config.implementations import runs_builtin
from reverify_assets.config.known_fields import model_field_names, unknown_field_problems
from reverify_assets.config.topology import ServerBlock
from reverify_assets.errors import ConfigError
from reverify_assets.servers.protocol import MetricsHooks, ResourcesServer


@dataclass(frozen=True)
class BuiltinServer:
    module: str  # imported only when the server is built: keeps the CLI's start-up light
    config_class: str
    server_class: str

    def config_model(self) -> type[BaseModel]:
        return getattr(import_module(self.module), self.config_class)

    def server_type(self) -> type[ResourcesServer]:
        return getattr(import_module(self.module), self.server_class)


# Keyed by the names in ``config.implementations.BUILTIN_TYPES`` (the launcher's layer knows only those).
BUILTIN_SERVERS: Mapping[str, BuiltinServer] = {
    "mcqa": BuiltinServer("reverify_assets.servers.mcqa.server", "MCQAServerConfig", "MCQAServer"),
    "equivalence_judge": BuiltinServer(
        "reverify_assets.servers.judge.server", "EquivalenceJudgeConfig", "EquivalenceJudgeServer"
    ),
}


def validate_builtin_block(block: ServerBlock) -> BaseModel:
    """The block's typed config; a block that is neither built in nor reachable by url is a config error, and so
    is a field its server does not know (``known_fields``)."""
    builtin = BUILTIN_SERVERS.get(block.type)
    if builtin is None:
        raise ConfigError(
            f"config: resources server {block.named()} has type {block.type!r}, which is not built in "
            f"(built in: {sorted(BUILTIN_SERVERS)}); give it a `url:` of a running NeMo-Gym-compatible server",
            key=block.config_key(),
            source=block.set_by(),
        )
    model = builtin.config_model()
    try:
        config = model.model_validate(dict(block.fields))
    except ValidationError as exc:
        problems = "; ".join(f"{block.named(*err['loc'])}: {err['msg']}" for err in exc.errors())
        first = exc.errors()[0]["loc"]  # a ValidationError holds one error at least
        raise ConfigError(f"config: {problems}", key=block.config_key(*first), source=block.set_by(*first)) from exc
    # After the model's own checks: a key pasted into the config gets the model's message, not a spelling hint.
    check_known_fields(block)
    return config


def check_known_fields(block: ServerBlock) -> None:
    """A field that the built-in server of the block's type does not know is a config error. It applies to NeMo
    Gym's own server of that type too (``implementation: nemo_gym``), which has the same fields and ignores others."""
    if unknown := unknown_field_problems(block, model_field_names(BUILTIN_SERVERS[block.type].config_model())):
        raise ConfigError(f"config: {'; '.join(unknown)}", key=block.config_key())


def builtin_metrics_hooks(block: ServerBlock) -> MetricsHooks | None:
    """The hooks of a built-in server the CLI would start itself; None for a server reached by ``url`` and for
    NeMo Gym's own servers, whose ``/aggregate_metrics`` is asked."""
    if block.url or not runs_builtin(block):
        return None
    return BUILTIN_SERVERS[block.type].server_type().metrics_hooks


def build_server(block: ServerBlock, *, judge_cache: Path | None) -> ResourcesServer:
    """``judge_cache``: where a server that calls a judge keeps and finds verdicts (None: it asks every time)."""
    config = validate_builtin_block(block)
    kind = BUILTIN_SERVERS[block.type].server_type()
    return kind(config, judge_cache=judge_cache) if kind.calls_a_judge else kind(config)  # type: ignore[call-arg]
