"""``reverify judge-serve``: the local judge model (OpenAI-compatible) in the foreground until Ctrl-C/SIGTERM.

Imports of the server stack stay inside the command so that building the parser costs nothing (the settings are
pydantic only).
"""

from __future__ import annotations

import argparse

from reverify_assets.cli.flags import parsed_options
from reverify_assets.local_judge.settings import FailureSettings
from reverify_assets.run.options import flag

DEFAULT_PORT = 8765  # what configs/judge.yaml points at


class JudgeServeOptions(FailureSettings):
    """The server's failure settings (``local_judge.settings``, their help there), and where it listens."""

    port: int = flag(f"port on 127.0.0.1, 0 = a free one ({DEFAULT_PORT})", DEFAULT_PORT)
    api_key_env: str | None = flag(
        "require `Authorization: Bearer $NAME` on every request (401 otherwise)", None, metavar="NAME"
    )

    def failure_settings(self) -> FailureSettings:
        return FailureSettings.model_validate(self.model_dump(include=set(FailureSettings.model_fields)))


def judge_serve_command(args: argparse.Namespace, overrides: list[str]) -> None:
    import asyncio
    import os

    from reverify_assets.errors import ConfigError, UsageError

    if overrides:
        raise UsageError(f"reverify judge-serve: takes no overrides, got {' '.join(overrides)}")
    options = parsed_options(args, JudgeServeOptions)
    api_key = None
    if options.api_key_env:
        api_key = os.environ.get(options.api_key_env)
        if not api_key:
            raise ConfigError(
                f"--api-key-env names {options.api_key_env!r}, which is not set in the environment",
                key=options.api_key_env,
            )
    asyncio.run(_serve(options.failure_settings(), api_key, options.port))
    print("judge model stopped", flush=True)


async def _serve(settings: FailureSettings, api_key: str | None, port: int) -> None:
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
