"""Starting built-in resources servers as child processes, and always stopping them.

Each child binds a free loopback port itself and announces it, so there is no port race; it
lives only as long as our stdin pipe to it, so even a SIGKILLed parent leaves no server behind.

A caller that knows its servers early (``reverify run``, right after reading its config) starts them
with ``prestarted_servers``; a ``ServerFleet`` in the same process then takes those children instead of
starting its own, so their start-up overlaps the caller's.
"""

from __future__ import annotations

import selectors
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import IO

import orjson

from reverify_assets.config.topology import ServerBlock
from reverify_assets.errors import ReverifyError
from reverify_assets.lib.child_python import child_environment, module_command
from reverify_assets.servers.child_process import READY_PREFIX


@dataclass(eq=False)  # a child is itself, not its fields: `in` and `remove` look for this very one
class _Child:
    block: ServerBlock
    process: subprocess.Popen[bytes]
    stderr: IO[bytes]


class ServerFleet:
    """``with ServerFleet(blocks) as urls:`` maps every block's instance to a URL that answers."""

    def __init__(self, blocks: Sequence[ServerBlock], *, startup_timeout: float = 30.0) -> None:
        self.blocks = list(blocks)
        self.startup_timeout = startup_timeout
        self._children: list[_Child] = []

    def __enter__(self) -> dict[str, str]:
        try:
            return self._start_all()
        except BaseException:
            self.stop()
            raise

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def _start_all(self) -> dict[str, str]:
        urls = {block.instance: block.url for block in self.blocks if block.url}
        for block in self.blocks:
            if not block.url:
                self._children.append(_take_prestarted(block) or _spawn(block))
        deadline = time.monotonic() + self.startup_timeout
        for child in self._children:
            url = self._await_listening(child, deadline)
            _check_health(url, child.block)
            urls[child.block.instance] = url
        return urls  # type: ignore[return-value]

    def _await_listening(self, child: _Child, deadline: float) -> str:
        assert child.process.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(child.process.stdout, selectors.EVENT_READ)
            while (remaining := deadline - time.monotonic()) > 0:
                if selector.select(timeout=min(remaining, 0.2)):
                    line = child.process.stdout.readline().decode(errors="replace").strip()
                    if line.startswith(READY_PREFIX):
                        return line.removeprefix(READY_PREFIX)
                    if not line and child.process.poll() is not None:
                        break
        raise ReverifyError(
            f"resources server {child.block.instance!r} ({child.block.type}) did not start: "
            f"{_tail(child.stderr) or 'no output'}"
        )

    def stop(self) -> None:
        _stop(self._children)
        self._children.clear()


def _spawn(block: ServerBlock) -> _Child:
    stderr = tempfile.TemporaryFile()
    process = subprocess.Popen(
        module_command("reverify_assets.servers.child_process"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,
        env=child_environment(),
    )
    assert process.stdin is not None
    process.stdin.write(_spec(block) + b"\n")
    process.stdin.flush()
    return _Child(block, process, stderr)


def _spec(block: ServerBlock) -> bytes:
    spec = {"instance": block.instance, "type": block.type, "fields": dict(block.fields)}
    return orjson.dumps(spec, option=orjson.OPT_SORT_KEYS)


def _stop(children: Sequence[_Child]) -> None:
    for child in children:
        if child.process.stdin and not child.process.stdin.closed:
            child.process.stdin.close()  # the child's cue to shut down cleanly
    for child in children:
        try:
            child.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            child.process.kill()
            child.process.wait()
        if child.process.stdout:
            child.process.stdout.close()
        child.stderr.close()


# Children started by `prestarted_servers` that no fleet has taken yet.
_prestarted: list[_Child] = []


@contextmanager
def prestarted_servers(blocks: Sequence[ServerBlock]) -> Iterator[None]:
    """Start the built-in servers of ``blocks`` now, for the ``ServerFleet`` asking for the same blocks later.

    The fleet that takes a child owns it from then on (and stops it); those none took are stopped on exit.
    """
    started = [_spawn(block) for block in blocks if not block.url]
    _prestarted.extend(started)
    try:
        yield
    finally:
        unclaimed = [child for child in started if child in _prestarted]
        for child in unclaimed:
            _prestarted.remove(child)
        _stop(unclaimed)


def _take_prestarted(block: ServerBlock) -> _Child | None:
    spec = _spec(block)
    for child in _prestarted:
        if _spec(child.block) == spec:
            _prestarted.remove(child)
            return child
    return None


def _check_health(url: str, block: ServerBlock) -> None:
    try:
        with urllib.request.urlopen(f"{url}/reverify_mode", timeout=5) as reply:
            reply.read()
    except OSError as exc:
        raise ReverifyError(f"resources server {block.instance!r} at {url} failed its health check: {exc}") from exc


def _tail(stream: IO[bytes], limit: int = 2000) -> str:
    stream.seek(0)
    return stream.read().decode(errors="replace")[-limit:].strip()
