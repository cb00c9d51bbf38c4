"""How one of NeMo Gym's own servers is started without Ray: its folder, its Python, its command and environment.

As ``gym env start`` does it: from the server's folder, ``<python> app.py`` (the block's ``entrypoint``, run through
``server_bootstrap.py``, which adds ``/verify_batch`` and ``/reverify_metrics``) with the
merged config in ``NEMO_GYM_CONFIG_DICT`` (YAML, as NeMo Gym writes it: JSON would escape non-ASCII text, which
its OmegaConf reads back as lone surrogates), the instance name in ``NEMO_GYM_CONFIG_PATH`` and the server's
folder first on ``PYTHONPATH``.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from reverify_assets.config.topology import RESOURCES_SERVERS, ServerBlock
from reverify_assets.errors import ConfigError
from reverify_assets.gym.installation import NemoGymInstallation
from reverify_assets.gym.server_config import LOOPBACK, gym_server_config
from reverify_assets.gym.server_python import server_python

SERVER_BOOTSTRAP = Path(__file__).with_name("server_bootstrap.py")  # run by the server's Python, not imported
CONFIG_DICT_ENV = "NEMO_GYM_CONFIG_DICT"
CONFIG_PATH_ENV = "NEMO_GYM_CONFIG_PATH"
ENTRYPOINT_FIELD = "entrypoint"
DEFAULT_ENTRYPOINT = "app.py"


@dataclass(frozen=True)
class GymServerCommand:
    argv: list[str]
    cwd: Path
    env: dict[str, str]
    url: str


def server_folder(block: ServerBlock, installation: NemoGymInstallation) -> Path:
    """The block's folder in the installation; a type NeMo Gym does not have is a config error naming the closest."""
    servers = installation.root / block.kind
    folder = servers / block.type
    entrypoint = _entrypoint(block)
    if (folder / entrypoint).is_file():
        return folder
    if folder.is_dir():
        raise ConfigError(
            f"config: {block.named(ENTRYPOINT_FIELD)} is {entrypoint!r}, which NeMo Gym's {folder} does not have",
            key=block.config_key(ENTRYPOINT_FIELD),
            source=block.set_by(ENTRYPOINT_FIELD),
        )
    known = sorted(path.name for path in servers.iterdir() if path.is_dir() and not path.name.startswith(("_", ".")))
    close = difflib.get_close_matches(block.type, known, n=1)
    hint = f" (did you mean `{close[0]}`?)" if close else ""
    what = "resources server" if block.kind == RESOURCES_SERVERS else "model server"
    built_in = "neither built in nor " if block.kind == RESOURCES_SERVERS else ""
    raise ConfigError(
        f"config: {what} {block.named()} has type {block.type!r}, which is {built_in}one of "
        f"the {len(known)} {block.kind} of NeMo Gym at {servers}{hint}",
        key=block.config_key(),
        source=block.set_by(),
    )


def gym_server_command(
    block: ServerBlock,
    config: Mapping[str, Any],
    installation: NemoGymInstallation,
    *,
    ports: Mapping[str, int],
    cache: Path,
) -> GymServerCommand:
    """``ports``: where this block and the servers it calls (a judge's model server) listen, by instance."""
    folder = server_folder(block, installation)
    python = server_python(installation, folder, cache)
    python_path = os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")]))
    env = {
        **os.environ,
        CONFIG_DICT_ENV: OmegaConf.to_yaml(OmegaConf.create(gym_server_config(config, ports))),
        CONFIG_PATH_ENV: block.instance,
        "PYTHONPATH": python_path,
        "PYTHONUNBUFFERED": "1",  # its log is read while it runs, and when it fails to start
    }
    url = f"http://{LOOPBACK}:{ports[block.instance]}"
    # The entrypoint run through our bootstrap, which adds its routes to the app the server builds.
    return GymServerCommand([str(python), str(SERVER_BOOTSTRAP), _entrypoint(block)], folder, env, url)


def _entrypoint(block: ServerBlock) -> str:
    return str(block.fields.get(ENTRYPOINT_FIELD) or DEFAULT_ENTRYPOINT)
