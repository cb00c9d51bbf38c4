"""Stop a run whose first rows of a server all failed to connect (the server to its judge, or to its model).

Such a run would otherwise spend every row's retries and finish with an exit status of 0 and nothing scored, its
cause only in the sidecar. A server is watched until it gives a row that is not a connection failure; the rows
that failed are already in the sidecar, not terminal, so ``--resume`` retries them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from reverify_assets.errors import ServerError

# How the errors of failing to connect read, from aiohttp, httpx, the OpenAI client and the OS.
CONNECT_FAILURE_MARKERS = (
    "ClientConnectorError",
    "Cannot connect to host",
    "ConnectError",
    "APIConnectionError",
    "ConnectionRefusedError",
    "Connection refused",
    "Name or service not known",
)
FIRST_ROWS = 16
# A row of another class (a program's own error that mentions a refused connection, a terminal failure) says
# nothing about whether the server can reach what it calls.
WATCHED_CLASSES = frozenset({"verify_failed", "judge_failed"})


def is_connect_failure(message: str) -> bool:
    return any(marker in message for marker in CONNECT_FAILURE_MARKERS)


class ServerCannotConnect(ServerError):
    pass


@dataclass
class UnreachableWatch:
    first_rows: int = FIRST_ROWS
    _failed: dict[str, int] = field(default_factory=dict)  # server -> its leading rows that failed to connect
    _cleared: set[str] = field(default_factory=set)

    def watching(self, server: str) -> bool:
        return server not in self._cleared

    def settled(self, server: str, failure_class: str | None, message: str | None) -> None:
        """One row of ``server`` settled: scored (no class), or failed with ``message``."""
        if server in self._cleared:
            return
        if failure_class not in WATCHED_CLASSES or message is None or not is_connect_failure(message):
            self._cleared.add(server)
            self._failed.pop(server, None)
            return
        self._failed[server] = failed = self._failed.get(server, 0) + 1
        if failed >= self.first_rows:
            raise ServerCannotConnect(
                f"the first {failed} rows verified by resources server {server!r} all failed to connect "
                f"({failure_class}): {message}. The run stops here; the rows settled so far are kept (these in the "
                "failures sidecar, not terminal): once what it connects to is up, run the same command with --resume",
                server=server,
            )
