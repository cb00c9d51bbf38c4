"""Which fields a built-in server's config block may hold, so that a misspelt one is an error, not a default.

A block holds its server's own fields, the fields NeMo Gym gives every server block, and the placement
fields this tool reads. Anything else is most likely a typo: left alone it would grade with the default
and give the results a new config hash.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from difflib import get_close_matches

from pydantic import AliasChoices, BaseModel
from pydantic.fields import FieldInfo

from reverify_assets.config.topology import ServerBlock

# NeMo Gym 0.7.0's fields of any resources server block. A block pasted from NeMo Gym carries them; our
# servers ignore them. From nemo_gym/config_types.py: BaseServerConfig (host, port, num_workers),
# BaseRunServerConfig (entrypoint, domain), BaseRunServerInstanceConfig (name), BaseRunServerTypeConfig
# (datasets); nemo_gym/base_resources_server.py: BaseResourcesServerConfig (expose_tools_over_mcp);
# nemo_gym/global_config.py: ALLOWED_AGENTS_KEY_NAME, ALLOWED_MODEL_TYPES_KEY_NAME; nemo_gym/server_metadata.py:
# ServerMetadata (description, verified, verified_url, value). judge_model_server is where NeMo Gym's judge
# servers (resources_servers/equivalence_llm_judge) find their judge: ours reaches it by judge_base_url.
NEMO_GYM_BLOCK_FIELDS = frozenset(
    {
        "host",
        "port",
        "num_workers",
        "entrypoint",
        "domain",
        "name",
        "datasets",
        "expose_tools_over_mcp",
        "allowed_agents",
        "allowed_model_types",
        "description",
        "verified",
        "verified_url",
        "value",
        "judge_model_server",
    }
)

# Fields this tool reads to decide where and how a server runs, whatever its type (not to be confused with
# fingerprint.PLACEMENT_FIELDS, the fields left out of the config hash).
REVERIFY_BLOCK_FIELDS = frozenset({"url", "implementation", "replicas", "startup_timeout_s"})


def model_field_names(model: type[BaseModel]) -> frozenset[str]:
    """Every name a config model accepts for its fields: their own and their aliases."""
    return frozenset(name for field_name, info in model.model_fields.items() for name in _names(field_name, info))


def _names(field_name: str, info: FieldInfo) -> Iterator[str]:
    yield field_name
    if info.alias is not None:
        yield info.alias
    if isinstance(info.validation_alias, str):
        yield info.validation_alias
    elif isinstance(info.validation_alias, AliasChoices):
        yield from (choice for choice in info.validation_alias.choices if isinstance(choice, str))


def unknown_field_problems(block: ServerBlock, model_fields: Collection[str]) -> list[str]:
    """One message per field of ``block`` that neither its server nor NeMo Gym nor this tool knows."""
    if block.url:
        return []  # a running server may be any server: its fields are its own business
    accepted = {*model_fields, *NEMO_GYM_BLOCK_FIELDS, *REVERIFY_BLOCK_FIELDS}
    return [
        f"{block.named(name)} is not a field of the built-in `{block.type}` server"
        + _hint(str(name), accepted, model_fields)
        for name in block.fields
        if name not in accepted
    ]


def _hint(name: str, accepted: Collection[str], model_fields: Collection[str]) -> str:
    close = get_close_matches(name, accepted, n=1)
    if close:
        return f" (did you mean `{close[0]}`?)"
    return f" (its fields: {', '.join(sorted(model_fields))})"
