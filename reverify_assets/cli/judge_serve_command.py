"""``reverify judge-serve``: the local judge model (OpenAI-compatible) in the foreground until Ctrl-C/SIGTERM.

Imports of the server stack stay inside the command so that building the parser costs nothing.
"""

from __future__ import annotations

import argparse
from typing import Any

DEFAULT_PORT = 8765  # what configs/judge.yaml points at


def add_judge_serve_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "judge-serve", help="run the local judge model for the equivalence_judge server (demo and tests)"
    )
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"port on 127.0.0.1, 0 = a free one ({DEFAULT_PORT})"
    )
    parser.add_argument("--fail-status", type=int, default=503, help="HTTP status of an injected failure (503)")
    parser.add_argument("--fail-share", type=float, default=0.0, help="share of requests that fail, 0..1 (0)")
    parser.add_argument("--seed", type=int, default=0, help="which requests the failing share hits (0)")
    parser.add_argument(
        "--flip-share", type=float, default=0.0, help="chance that a verdict is flipped, drawn per request, 0..1 (0)"
    )
    parser.add_argument("--latency-ms", type=float, default=0.0, help="wait before every answer (0)")
    parser.add_argument(
        "--rate-limit-rps", type=float, metavar="N", help="answer N requests a second, 429 + Retry-After for the rest"
    )
    parser.add_argument("--outage", metavar="START:END", help="fail every request from START to END s after start")
    parser.add_argument(
        "--api-key-env", metavar="NAME", help="require `Authorization: Bearer $NAME` on every request (401 otherwise)"
    )


def judge_serve_command(args: argparse.Namespace, overrides: list[str]) -> None:
    import asyncio
    import os

    from pydantic import ValidationError

    from reverify_assets.errors import ConfigError, UsageError
    from reverify_assets.local_judge.settings import FailureSettings

    if overrides:
        raise UsageError(f"reverify judge-serve: takes no overrides, got {' '.join(overrides)}")
    try:
        settings = FailureSettings(
            fail_status=args.fail_status,
            fail_share=args.fail_share,
            flip_share=args.flip_share,
            seed=args.seed,
            latency_ms=args.latency_ms,
            rate_limit_rps=args.rate_limit_rps,
            outage=args.outage,
        )
    except ValidationError as exc:
        problems = "; ".join(f"--{'-'.join(map(str, e['loc'])).replace('_', '-')}: {e['msg']}" for e in exc.errors())
        raise UsageError(f"reverify judge-serve: {problems}") from exc
    api_key = None
    if args.api_key_env:
        api_key = os.environ.get(args.api_key_env)
        if not api_key:
            raise ConfigError(
                f"--api-key-env names {args.api_key_env!r}, which is not set in the environment", key=args.api_key_env
            )
    asyncio.run(_serve(settings, api_key, args.port))
    print("judge model stopped", flush=True)


async def _serve(settings: Any, api_key: str | None, port: int) -> None:
    import asyncio
    import signal
    from contextlib import suppress

    from aiohttp import web

    from reverify_assets.errors import ServerError
    from reverify_assets.local_judge.server import JudgeModel
    from reverify_assets.rows.verifier_wire import LOOPBACK, bind_loopback

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        with suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signum, stop.set)
    try:
        sock = bind_loopback(port)
    except OSError as exc:
        raise ServerError(f"cannot listen on {LOOPBACK}:{port}: {exc.strerror or exc}") from exc
    runner = web.AppRunner(JudgeModel(settings, api_key=api_key).app(), access_log=None, handle_signals=False)
    await runner.setup()
    try:
        await web.SockSite(runner, sock).start()
        print(f"judge model listening on http://{LOOPBACK}:{sock.getsockname()[1]}", flush=True)
        await stop.wait()
    finally:
        await runner.cleanup()
