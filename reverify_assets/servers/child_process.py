"""Entry point of a built-in server started by the launcher: one block, announced port, parent-bound life.

Reads the block as JSON on stdin, prints ``LISTENING <url>`` once serving, and exits when the
parent closes stdin, so a parent killed with SIGKILL never leaves a server behind.
"""

from __future__ import annotations

import asyncio
import sys

import orjson

from reverify_assets.config.topology import ServerBlock
from reverify_assets.lib.verifier_wire import READY_PREFIX
from reverify_assets.servers.hosting import serve_until_stopped


async def _main() -> None:
    spec = orjson.loads(sys.stdin.buffer.readline())
    block = ServerBlock(spec["instance"], spec["type"], spec["fields"])
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)

    async def stop_when_parent_goes() -> None:
        await reader.read()  # returns at EOF: the parent closed the pipe or died
        stop.set()

    def announce(_: ServerBlock, url: str) -> None:
        print(f"{READY_PREFIX}{url}", flush=True)

    watcher = asyncio.create_task(stop_when_parent_goes())
    await serve_until_stopped([block], on_listening=announce, stop=stop)
    watcher.cancel()


if __name__ == "__main__":
    asyncio.run(_main())
