"""Starting resources servers as child processes, and always stopping them.

A built-in server binds a free loopback port itself and announces it, so there is no port race; it lives only
as long as our stdin pipe to it, so even a SIGKILLed parent leaves no server behind. One of NeMo Gym's own
servers (see ``gym.launch``) is given a free port in its config and runs under ``process_guard``, which holds the
same pipe; it is ready when its ``/reverify_mode`` answers, and its output goes to a log file whose last lines
are shown if it fails to start. Either runs in a process group of its own: a terminal sends Ctrl-C to its whole
foreground group, and a server killed by it while starting read as a server that failed to start; the parent
handles the Ctrl-C and stops its servers on its way out.

A caller that knows its servers early (``reverify run``, right after reading its config) starts them
with ``prestarted_servers``; a ``ServerFleet`` given that pool borrows those children instead of starting its
own, so their start-up overlaps the caller's, and gives them back when it stops: the verify step and the
aggregation share one NeMo Gym server, whose start costs seconds.
"""

from __future__ import annotations

import logging
import select
import selectors
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import orjson

from reverify_assets.config.implementations import runs_builtin
from reverify_assets.config.topology import ServerBlock
from reverify_assets.errors import ServerError
from reverify_assets.gym.installation import NemoGymInstallation, find_installation
from reverify_assets.gym.launch import gym_server_command
from reverify_assets.gym.server_config import LOOPBACK, model_identity
from reverify_assets.gym.server_python import default_cache
from reverify_assets.processes import secrets as process_secrets
from reverify_assets.processes.child_python import child_environment, module_command
from reverify_assets.rows.verifier_wire import READY_PREFIX

log = logging.getLogger("reverify")
BUILTIN_STARTUP_S = 30.0
# NeMo Gym's servers import nemo_gym (seconds) and their own libraries; NeMo Gym itself waits up to 600 s.
GYM_STARTUP_S = 300.0
STARTUP_TIMEOUT_FIELD = "startup_timeout_s"
KEPT_LOGS = 50
LOG_KEPT_WHILE_RECENT_S = 24 * 3600.0


@dataclass(eq=False)  # a child is itself, not its fields: `in` and `remove` look for this very one
class _Child:
    block: ServerBlock
    # What it was started for: a fleet takes a prestarted child only for the very same (a model server started
    # for a judge is never lent, and has none).
    identity: bytes
    process: subprocess.Popen[bytes]
    output: IO[bytes]  # what it printed besides its ready line: the server's stderr, or its log
    url: str | None = None  # known before it starts for NeMo Gym's servers; built-in ones announce theirs
    log_path: Path | None = None
    ready: bool = False
    borrowed: bool = False  # from a PrestartedServers, which stops it (a replacement after a port clash is not)
    companions: list[_Child] = field(default_factory=list)  # started for it (a judge's model server), stopped with it
    started_at: float = field(default_factory=time.monotonic)
    # Its start-up limit counts from here: when a fleet began to wait for it (a prestarted child waits for the
    # caller's own start-up first, which must not count against it).
    wait_from: float = field(default_factory=time.monotonic)


class ServerFleet:
    """``with ServerFleet(blocks, config, judge_cache=...) as urls:`` maps every block's instance to a URL that answers.

    ``config`` is the merged config the blocks come from: NeMo Gym's servers are given all of it, as NeMo Gym does.
    ``judge_cache``: the judge-call cache the servers that call a judge use (None: they ask it every time).
    ``prestarted``: servers the caller started ahead, borrowed for the blocks they were started for.
    """

    def __init__(
        self,
        blocks: Sequence[ServerBlock],
        config: Mapping[str, Any] | None = None,
        prestarted: PrestartedServers | None = None,
        *,
        judge_cache: Path | None,
    ) -> None:
        self.blocks = list(blocks)
        self.config: Mapping[str, Any] = config or {}
        self.judge_cache = judge_cache
        self.prestarted = prestarted or PrestartedServers()
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
                self._children.append(self._borrow_or_spawn(block))
        for position, child in enumerate(self._children):
            child = self._children[position] = _await_ready(child, self.config, self.judge_cache)
            urls[child.block.instance] = child.url  # type: ignore[assignment]
        return urls  # type: ignore[return-value]

    def add_replicas(self, instance: str, count: int) -> list[_Child]:
        """``count`` more copies of the server of ``instance`` (those the caller prestarted first), stopped or given
        back with the fleet; see ``replica_url``."""
        block = next(block for block in self.blocks if block.instance == instance)
        added = []
        for _ in range(count):
            added.append(self._borrow_or_spawn(block))
            self._children.append(added[-1])  # at once: one that fails to start leaves the others stoppable
        return added

    def _borrow_or_spawn(self, block: ServerBlock) -> _Child:
        return self.prestarted.borrow(block, self.config, self.judge_cache) or _spawn(
            block, self.config, self.judge_cache
        )

    def replica_url(self, child: _Child) -> str | None:
        """The URL of a copy from ``add_replicas`` once it answers, None while it starts (without waiting: an
        event loop asks again later); a ServerError when it exited or did not answer in time."""
        if all(_ready_now(server) for server in [*child.companions, child]):
            return child.url
        return None

    def stop(self) -> None:
        _stop([child for child in self._children if not child.borrowed])
        self.prestarted.give_back([child for child in self._children if child.borrowed])
        self._children.clear()


def _spawn(block: ServerBlock, config: Mapping[str, Any], judge_cache: Path | None) -> _Child:
    if runs_builtin(block):
        return _spawn_builtin(block, judge_cache)
    return _spawn_gym(block, config, judge_cache)


def _identity(block: ServerBlock, config: Mapping[str, Any], judge_cache: Path | None) -> bytes:
    spec = _builtin_spec(block, judge_cache)
    if not runs_builtin(block):
        spec["config"] = config
    return orjson.dumps(spec, option=orjson.OPT_SORT_KEYS)


def _builtin_spec(block: ServerBlock, judge_cache: Path | None) -> dict[str, Any]:
    """What ``servers.child_process`` reads on its stdin."""
    cache = None if judge_cache is None else str(judge_cache)
    return {"instance": block.instance, "type": block.type, "fields": dict(block.fields), "judge_cache": cache}


def _spawn_builtin(block: ServerBlock, judge_cache: Path | None) -> _Child:
    process, stderr = _start_module("reverify_assets.servers.child_process", _builtin_spec(block, judge_cache))
    return _Child(block, _identity(block, {}, judge_cache), process, stderr)


def _start_module(module: str, spec: Mapping[str, Any]) -> tuple[subprocess.Popen[bytes], IO[bytes]]:
    """One of our modules as a child that reads ``spec`` on its stdin, then keeps the pipe as its lifeline."""
    stderr = tempfile.TemporaryFile()
    process = subprocess.Popen(
        module_command(module),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,
        env=child_environment(),
        process_group=0,
    )
    assert process.stdin is not None
    process.stdin.write(orjson.dumps(spec) + b"\n")
    process.stdin.flush()
    return process, stderr


def _spawn_gym(block: ServerBlock, config: Mapping[str, Any], judge_cache: Path | None) -> _Child:
    """The server, and first the model servers it calls (a judge's) where the config declares them; with the
    judge-call cache on, the server reaches each of those through a caching proxy (``judge_cache.proxy``)."""
    installation = find_installation(config)
    models = list({model.instance: model for model in block.referenced_models(config)}.values())
    companions = [model for model in models if not model.url]
    ports = {server.instance: _free_port() for server in [*companions, block]}
    started: list[_Child] = []
    try:
        for companion in companions:
            started.append(_spawn_gym_process(companion, config, installation, ports))
        seen_at = dict(ports)  # where the server is told its model servers are
        if judge_cache is not None:
            for model in models:
                target = model.url or f"http://{LOOPBACK}:{ports[model.instance]}"
                started.append(_spawn_cache_proxy(model, target, judge_cache))
                seen_at[model.instance] = int(str(started[-1].url).rsplit(":", 1)[1])
        child = _spawn_gym_process(block, config, installation, seen_at)
    except BaseException:
        _stop(started)
        raise
    child.companions = started
    child.identity = _identity(block, config, judge_cache)
    return child


def _spawn_cache_proxy(model: ServerBlock, target: str, cache: Path) -> _Child:
    """Started and listening before the server that calls it is started, which is told its port; its model
    server may still be starting (a call meanwhile gets a 502, which the judge server retries)."""
    spec = {"endpoint": model_identity(model), "target": target.rstrip("/"), "cache": str(cache)}
    process, stderr = _start_module("reverify_assets.judge_cache.proxy", spec)
    assert process.stdout is not None
    proxy = _Child(model, b"", process, stderr)
    ready, _, _ = select.select([process.stdout], [], [], BUILTIN_STARTUP_S)
    line = process.stdout.readline() if ready else b""
    if not line.startswith(READY_PREFIX.encode()):
        _stop([proxy])
        raise ServerError(
            f"the judge-call cache's proxy for model server {model.instance!r} did not start (run with "
            f"--no-judge-cache to do without it). The last lines of its output:\n{_tail(stderr) or '(empty)'}",
            server=model.instance,
        )
    proxy.url, proxy.ready = line.decode().strip().removeprefix(READY_PREFIX), True
    return proxy


def _spawn_gym_process(
    block: ServerBlock, config: Mapping[str, Any], installation: NemoGymInstallation, ports: Mapping[str, int]
) -> _Child:
    command = gym_server_command(block, config, installation, ports=ports, cache=default_cache())
    log_path = _new_log(block)
    process = subprocess.Popen(
        module_command("reverify_assets.verifier.process_guard"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=child_environment(),
        process_group=0,
    )
    assert process.stdin is not None
    spec = {"argv": command.argv, "cwd": str(command.cwd), "env": command.env, "log": str(log_path)}
    process.stdin.write(orjson.dumps(spec) + b"\n")
    process.stdin.flush()
    log.info(
        "reverify: starting NeMo Gym's %s server for %r: %s in %s; its log: %s",
        block.type,
        block.instance,
        " ".join(command.argv),
        command.cwd,
        log_path,
    )
    return _Child(block, b"", process, log_path.open("rb"), command.url, log_path)


def _free_port() -> int:
    # The server binds it a moment later: another process taking it in between is retried (see _await_ready).
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _new_log(block: ServerBlock) -> Path:
    folder = default_cache() / "server-logs"
    folder.mkdir(parents=True, exist_ok=True)
    logs = sorted(folder.glob("*.log"))  # named by the time they were started: the oldest go first
    for old in logs[: max(0, len(logs) - KEPT_LOGS)]:
        if old.stat().st_mtime < time.time() - LOG_KEPT_WHILE_RECENT_S:  # never the log of a server still running
            old.unlink(missing_ok=True)
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S-%f")
    path = folder / f"{stamp}-{block.instance}.log"
    path.touch()  # here, so that it can be read before the guard has opened it
    return path


PORT_TAKEN = "address already in use"
PORT_TRIES = 3


def _await_ready(child: _Child, config: Mapping[str, Any], judge_cache: Path | None) -> _Child:
    """``child`` once it answers (a NeMo Gym server that lost its port to another process is started again)."""
    for attempt in range(PORT_TRIES):
        try:
            for server in [*child.companions, child]:
                _wait_until_ready(server)
            return child
        except _PortTaken as taken:
            _stop([child])
            if attempt == PORT_TRIES - 1:
                raise ServerError(
                    f"NeMo Gym's {child.block.type} server for {child.block.instance!r} found its port taken "
                    f"{PORT_TRIES} times; the last log: {taken.log_path}",
                    server=child.block.instance,
                    path=taken.log_path,
                ) from None
            child = _spawn_gym(child.block, config, judge_cache)
    raise AssertionError("unreachable: the last attempt returns or raises")


def _wait_until_ready(child: _Child) -> None:
    assert child.process.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(child.process.stdout, selectors.EVENT_READ)
        while not _ready_now(child):
            selector.select(timeout=0.1)  # wakes at once when the child prints (its ready line, or EOF)


def _startup_limit(block: ServerBlock, builtin: bool) -> float:
    return float(block.fields.get(STARTUP_TIMEOUT_FIELD) or (BUILTIN_STARTUP_S if builtin else GYM_STARTUP_S))


class _PortTaken(ServerError):
    def __init__(self, log_path: Path | None, server: str | None = None) -> None:
        super().__init__(f"its port was taken (log {log_path})", server=server, path=log_path)
        self.log_path = log_path


def _ready_now(child: _Child) -> bool:
    """One look, without waiting, at whether ``child`` answers; raises when it never will. A built-in server
    announces its URL on stdout; a NeMo Gym server's guard prints one line, then nothing until it exits."""
    if child.ready:
        return True
    assert child.process.stdout is not None
    builtin = child.log_path is None
    readable, _, _ = select.select([child.process.stdout], [], [], 0)
    line = child.process.stdout.readline() if readable else None
    if line and child.url is None and line.startswith(READY_PREFIX.encode()):
        child.url = line.decode(errors="replace").strip().removeprefix(READY_PREFIX)
    elif line == b"":  # EOF: the child (or the guard of a NeMo Gym server) exited
        child.process.wait()
        raise _exited(child)
    # A short wait for the answer: an event loop asks this of copies while it sends rows to the others.
    if child.url is not None and _answers(child.url, timeout=1):
        child.ready = True
        if not builtin:
            took = time.monotonic() - child.started_at
            log.info("reverify: NeMo Gym's %s server answered after %.1f s", child.block.type, took)
        return True
    limit = _startup_limit(child.block, builtin)
    if time.monotonic() > child.wait_from + limit:
        raise ServerError(
            f"{_described(child)} did not answer{f' at {child.url}' if child.url else ''} within {limit:.0f} s "
            f"(the limit: {child.block.named(STARTUP_TIMEOUT_FIELD)}). {_last_lines(child)}",
            server=child.block.instance,
            path=child.log_path,
        )
    return False


def _exited(child: _Child) -> ServerError:
    tail = _tail(child.output)
    if child.url is not None and PORT_TAKEN in tail.lower() and child.url.rsplit(":", 1)[-1] in tail:
        return _PortTaken(child.log_path, child.block.instance)  # its own port, not one it opened later
    return ServerError(
        f"{_described(child)} exited with code {child.process.returncode} before it answered. {_last_lines(child)}",
        server=child.block.instance,
        path=child.log_path,
    )


def _described(child: _Child) -> str:
    if child.log_path is None:
        return f"resources server {child.block.instance!r} ({child.block.type})"
    return f"NeMo Gym's {child.block.type} server for {child.block.instance!r}"


def _last_lines(child: _Child) -> str:
    where = f"its log ({child.log_path})" if child.log_path else "its output"
    return f"The last lines of {where}:\n{_tail(child.output) or '(empty)'}"


def _answers(url: str, timeout: float) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/reverify_mode", timeout=timeout) as reply:
            reply.read()
    except urllib.error.HTTPError as error:
        # Serving, unless it fails: a model server has no such route (404); a 5xx may be another process's.
        return error.code < 500
    except OSError:
        return False
    return True


def _stop(children: Sequence[_Child]) -> None:
    children = [*children, *(companion for child in children for companion in child.companions)]
    for child in children:
        if child.process.stdin and not child.process.stdin.closed:
            child.process.stdin.close()  # the child's cue to shut down cleanly
    for child in children:
        try:
            child.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            child.process.kill()  # a guard's server dies with it (see process_guard)
            child.process.wait()
        if child.process.stdout:
            child.process.stdout.close()
        child.output.close()


class PrestartedServers:
    """Servers started ahead for ``ServerFleet``s that will ask for the very same blocks; the pool stops them.
    An empty pool (nothing started ahead) lends nothing: a fleet then starts its own."""

    def __init__(self) -> None:
        self._started: list[_Child] = []
        self._idle: list[_Child] = []  # started, and not lent just now

    def start(self, blocks: Sequence[ServerBlock], config: Mapping[str, Any], judge_cache: Path | None) -> None:
        """A block that asks for several copies (``replicas: N``) gets them all now: their start-up then
        overlaps the caller's, not the rows' (copies a fleet does not take are stopped unused)."""
        for block in blocks:
            for _ in range(0 if block.url else block.replicas_asked):
                self._started.append(_spawn(block, config, judge_cache))
                self._started[-1].borrowed = True
                self._idle.append(self._started[-1])

    def borrow(self, block: ServerBlock, config: Mapping[str, Any], judge_cache: Path | None) -> _Child | None:
        identity = _identity(block, config, judge_cache)
        for child in self._idle:
            if child.identity == identity:
                self._idle.remove(child)
                child.wait_from = time.monotonic()
                return child
        return None

    def give_back(self, children: Sequence[_Child]) -> None:
        self._idle.extend(child for child in children if child in self._started)

    @property
    def idle(self) -> list[_Child]:
        return list(self._idle)

    def stop(self) -> None:
        self._idle.clear()
        _stop(self._started)
        self._started.clear()


@contextmanager
def prestarted_servers(
    blocks: Sequence[ServerBlock], config: Mapping[str, Any] | None = None, *, judge_cache: Path | None
) -> Iterator[PrestartedServers]:
    """The servers of ``blocks``, started now, for the fleets given the pool (with the same ``judge_cache``);
    stopped on exit."""
    pool = PrestartedServers()
    try:
        pool.start(blocks, config or {}, judge_cache)
        yield pool
    finally:
        pool.stop()


def _tail(stream: IO[bytes], limit: int = 3000) -> str:
    """The end of what a server printed, as an error quotes it: without the secrets it may have printed."""
    stream.seek(0)
    return process_secrets.redact(stream.read().decode(errors="replace")[-limit:].strip())
