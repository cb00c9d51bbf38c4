"""``reverify serve``: the configured built-in resources servers, in the foreground until Ctrl-C."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from reverify_assets.config.topology import ServerBlock
from reverify_assets.errors import ReverifyError
from reverify_assets.pipeline.preparation import load_verifier_setup
from reverify_assets.servers.hosting import serve_until_stopped


def serve_command(args: argparse.Namespace, overrides: list[str]) -> None:
    setup = load_verifier_setup([Path(p) for p in args.config], overrides)
    blocks = [block for block in setup.topology.servers.values() if not block.url]
    if not blocks:
        raise ReverifyError("the config names no built-in server to run (every server block has a `url:`)")

    def announce(block: ServerBlock, url: str) -> None:
        print(f"{block.instance} ({block.type}) listening on {url}", flush=True)

    asyncio.run(serve_until_stopped(blocks, on_listening=announce))
    print("servers stopped", flush=True)
