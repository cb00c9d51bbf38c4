"""The secrets a verifier config points at, for the CLI to redact from what it writes, logs and raises.

The CLI holds them too: the built-in judge reads its key from the CLI's environment, and a NeMo Gym model
server's key is a config value. A server that quotes a key back (in an error body, in a failure row) is
redacted where it answers when it is ours; NeMo Gym's servers are redacted here, on the way to our files.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from typing import Any

from reverify_assets.config.topology import Topology
from reverify_assets.processes.redaction import RUN_CHARS
from reverify_assets.servers.judge.config import DEFAULT_API_KEY_ENV

JUDGE_TYPE = "equivalence_judge"
KEY_FIELD_SUFFIX = "api_key"  # NeMo Gym's `openai_api_key` of a model server, `policy_api_key` of env.yaml
KEY_ENV_FIELD = "api_key_env"


def config_secrets(config: Mapping[str, Any], topology: Topology) -> list[str]:
    """Every string the config gives a field named ``*api_key``, and the value of each environment variable a
    judge block reads its key from (its ``api_key_env``, ``JUDGE_API_KEY`` unless it says otherwise).

    Values shorter than a redacted run are left out: they are placeholders (``none``, ``EMPTY``, ``dummy``) that
    no provider checks, and redacting them whole from every row would mangle the rows' words.
    """
    secrets = list(_key_values(config))
    for block in topology.servers.values():
        if block.type == JUDGE_TYPE and (variable := block.fields.get(KEY_ENV_FIELD, DEFAULT_API_KEY_ENV)):
            secrets.append(os.environ.get(str(variable), ""))
    return [secret for secret in secrets if len(secret) >= RUN_CHARS]


def _key_values(value: Any) -> Iterator[str]:
    if isinstance(value, Mapping):
        for name, field in value.items():
            if isinstance(name, str) and name.endswith(KEY_FIELD_SUFFIX) and isinstance(field, str):
                yield field
            else:
                yield from _key_values(field)
    elif isinstance(value, list):
        for item in value:
            yield from _key_values(item)
