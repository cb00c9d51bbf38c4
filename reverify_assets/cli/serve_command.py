"""``reverify serve``: the config's resources servers, in the foreground until Ctrl-C, for rescorings that reach them
by ``url``.

A built-in server that runs as one copy is served in this process. NeMo Gym's own servers, and servers that run as
several copies (``replicas``, see ``run.replication``), are started as for a run; several copies sit behind
one address (``verifier.balancer``: the block's ``port``, else a free one) that sends each request to the copy
with the fewest in flight.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import urllib.error
import urllib.request
from contextlib import suppress
from dataclasses import replace
from pathlib import Path

import orjson
from aiohttp import web

from reverify_assets.config.implementations import runs_builtin
from reverify_assets.config.topology import ServerBlock
from reverify_assets.errors import ConfigError, ServerError
from reverify_assets.rows.verifier_wire import bind_loopback
from reverify_assets.run.preparation import VerifierSetup, load_verifier_setup
from reverify_assets.run.replication import add_replicas, wanted_replicas
from reverify_assets.servers.hosting import serve_until_stopped
from reverify_assets.verifier.balancer import Balancer
from reverify_assets.verifier.launcher import ServerFleet

PORT_FIELD = "port"


def announce(block: ServerBlock, url: str, copies: int = 1) -> None:
    more = f" ({copies} copies)" if copies > 1 else ""
    print(f"{block.instance} ({block.type}) listening on {url}{more}", flush=True)


def serve_command(args: argparse.Namespace, overrides: list[str]) -> None:
    setup = load_verifier_setup([Path(p) for p in args.config_paths], overrides)
    if args.no_judge_cache:
        setup = setup.without_judge_cache()
    blocks = [block for block in setup.topology.servers.values() if not block.url]
    if not blocks:
        raise ConfigError("the config names no server to run (every server block has a `url:`)")
    here = [block for block in blocks if runs_builtin(block) and block.replicas_asked == 1]
    # A block's `port` is where this command answers for it: its balancer's, in front of copies started on free
    # ports (a copy binding it would leave the balancer none).
    ports = {block.instance: block.fields.get(PORT_FIELD) for block in blocks if block not in here}
    started = [without_port(block) for block in blocks if block not in here]
    fleet = ServerFleet(started, setup.config, judge_cache=setup.judge_cache)
    with fleet as urls:
        asyncio.run(_serve(setup, here, fleet, urls, ports))
    print("servers stopped", flush=True)


def without_port(block: ServerBlock) -> ServerBlock:
    return replace(block, fields={name: value for name, value in block.fields.items() if name != PORT_FIELD})


async def _serve(
    setup: VerifierSetup,
    here: list[ServerBlock],
    fleet: ServerFleet,
    urls: dict[str, str],
    ports: dict[str, int | None],
) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        with suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signum, stop.set)
    runners: list[web.AppRunner] = []
    growth: list[asyncio.Task[None]] = []
    try:
        for block in fleet.blocks:
            mode = await asyncio.to_thread(_reverify_mode, block.instance, urls[block.instance])
            copies = wanted_replicas(block, mode, force=setup.config.get("force") is True)
            if copies == 1 and not ports[block.instance]:
                announce(block, urls[block.instance])
                continue
            balancer = Balancer(urls[block.instance])
            runner = web.AppRunner(balancer.app(), access_log=None, handle_signals=False)
            await runner.setup()
            runners.append(runner)
            sock = bind_loopback(int(ports[block.instance] or 0))
            await web.SockSite(runner, sock).start()
            announce(block, f"http://127.0.0.1:{sock.getsockname()[1]}", copies)
            if copies > 1:
                growth.append(asyncio.create_task(add_replicas(fleet, block.instance, copies - 1, balancer.add)))
        await serve_until_stopped(here, judge_cache=setup.judge_cache, on_listening=announce, stop=stop)
    finally:
        for task in growth:
            task.cancel()
        await asyncio.gather(*growth, return_exceptions=True)  # copies still starting: the fleet stops them
        for runner in runners:
            await runner.cleanup()


def _reverify_mode(server: str, url: str) -> str:
    try:
        with urllib.request.urlopen(f"{url}/reverify_mode", timeout=30) as reply:
            return str(orjson.loads(reply.read())).lower()
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return "unknown"  # a server without the route declares nothing, as the run's client reads it
        raise ServerError(f"GET {url}/reverify_mode answered HTTP {exc.code}", server=server) from exc
