"""Entry point of a built-in server started by the launcher: one block, announced port, parent-bound life.

Reads the block as JSON on stdin, prints ``LISTENING <url>`` once serving, and exits as soon as the parent
closes stdin or dies (``processes.lifelines``), so a parent killed with SIGKILL never leaves a server behind. The
lifeline is watched before the server's own imports, which take half a second: a parent killed meanwhile
does not wait for them.
"""

from __future__ import annotations

import sys

from reverify_assets.processes.lifelines import exit_with_parent


def main() -> None:
    exit_with_parent()
    import asyncio
    from pathlib import Path

    import orjson

    from reverify_assets.config.topology import ServerBlock
    from reverify_assets.rows.verifier_wire import READY_PREFIX
    from reverify_assets.servers.hosting import serve_until_stopped

    spec = orjson.loads(sys.stdin.buffer.readline())
    block = ServerBlock(spec["instance"], spec["type"], spec["fields"])
    judge_cache = None if spec["judge_cache"] is None else Path(spec["judge_cache"])

    def announce(_: ServerBlock, url: str) -> None:
        print(f"{READY_PREFIX}{url}", flush=True)

    asyncio.run(serve_until_stopped([block], judge_cache=judge_cache, on_listening=announce))


if __name__ == "__main__":
    main()
