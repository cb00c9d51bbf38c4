"""The config one of NeMo Gym's servers reads at start-up, as ``gym env start`` would hand it over.

NeMo Gym passes every server the whole merged config (``NEMO_GYM_CONFIG_DICT``) and the server's instance name
(``NEMO_GYM_CONFIG_PATH``); the server finds its own block, and the blocks of servers it calls (a judge's model
server), by instance, and reaches them at their ``host`` and ``port``. Its parser also fills ``head_server``
and ``dry_run``, which every server reads; nothing here needs the head server to listen.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import orjson

from reverify_assets.config.topology import ServerBlock, declared_block
from reverify_assets.gym.installation import SETTINGS_KEYS

LOOPBACK = "127.0.0.1"
# Block fields that only this tool reads: a NeMo Gym server is not shown them.
OUR_BLOCK_FIELDS = frozenset({"implementation", "replicas", "startup_timeout_s"})
DEFAULT_PORTS = {"http": 80, "https": 443}
SECRET_WORDS = ("key", "token", "secret", "password")
HEAD_SERVER_PORT = 0  # never listened on: a server that tried to reach it would fail at once, not hang


def gym_server_config(config: Mapping[str, Any], ports: Mapping[str, int]) -> dict[str, Any]:
    """``config`` as NeMo Gym's servers read it, the servers we start (``ports``: instance -> port) placed on
    loopback and the servers reached by ``url`` placed at its host and port."""
    placed: dict[str, Any] = {}
    for key, value in config.items():
        if key in SETTINGS_KEYS:
            continue
        block = declared_block(key, value)
        placed[key] = value if block is None else _placed(block, ports.get(key))
    placed.setdefault("head_server", {"host": LOOPBACK, "port": HEAD_SERVER_PORT})
    placed.setdefault("dry_run", False)
    return placed


def model_identity(block: ServerBlock) -> str:
    """What a model server answers as, for the judge-call cache's key: its type and config, without where it
    listens (a new port each run) and without a field that names a secret (a rotated key asks the same model)."""
    where = {"host", "port", "entrypoint"}
    fields = {
        name: value
        for name, value in block.fields.items()
        if name not in where and name not in OUR_BLOCK_FIELDS and not any(word in name.lower() for word in SECRET_WORDS)
    }
    return orjson.dumps({"type": block.type, "fields": fields}, option=orjson.OPT_SORT_KEYS, default=str).decode()


def _placed(block: ServerBlock, port: int | None) -> dict[str, Any]:
    placed = {name: value for name, value in block.fields.items() if name not in OUR_BLOCK_FIELDS}
    if port is not None:
        placed.update(host=LOOPBACK, port=port)
    elif placed.get("url"):
        address = urlsplit(str(placed["url"]))
        port = address.port or DEFAULT_PORTS.get(address.scheme)
        if address.hostname and port:
            placed.setdefault("host", address.hostname)
            placed.setdefault("port", port)
    return {block.kind: {block.type: placed}}
