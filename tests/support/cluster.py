"""A Dagster-on-Celery cluster in miniature, for the scale-out tests: Redis from Debian's package, the Dagster
daemon, Celery workers (each, where the machine allows, a host of its own: a network namespace that reaches
Redis and PostgreSQL over a veth pair). Every process is started by the test and stopped, with its children,
when it ends; every server binds to loopback or to the addresses of the namespaces made here.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.support.postgres import PostgresServer, free_port
from tests.support.process_tree import descendants, kill_all

VENV_BIN = Path(__file__).resolve().parents[2] / ".venv" / "bin"
SUBNET = "10.231"  # 10.231.<n>.1 the host's end of namespace n's veth pair, 10.231.<n>.2 the namespace's
START_TIMEOUT_S = 60.0
START_ATTEMPTS = 3
NAMESPACE_NAME = re.compile(r"rv(\d+)n\d+")


class ClusterUnavailable(RuntimeError):
    """A piece of the cluster cannot be had on this machine (no redis-server, no right to make namespaces)."""


@dataclass(frozen=True)
class Namespace:
    """A network namespace standing for a host: ``address`` is its own, ``host_address`` the machine's as the
    namespace reaches it."""

    name: str
    address: str
    host_address: str

    def command(self, command: Sequence[str]) -> list[str]:
        return ["ip", "netns", "exec", self.name, *command]


@contextlib.contextmanager
def network_namespaces(count: int) -> Iterator[list[Namespace]]:
    """``count`` namespaces, each joined to this one by a veth pair; removed (with their links) on exit. Raises
    ClusterUnavailable when namespaces cannot be made here (no ``ip``, no CAP_SYS_ADMIN)."""
    if shutil.which("ip") is None:
        raise ClusterUnavailable("no `ip` command (iproute2) to make network namespaces")
    _remove_stale_namespaces()
    tag = f"{os.getpid()}"
    made: list[Namespace] = []
    host_ends: list[str] = []
    try:
        for number in range(1, count + 1):
            # Interface names are at most 15 bytes: the pid in the namespace's name only.
            name, host_end, own_end = f"rv{tag}n{number}", f"rvh{os.getpid() % 10000}x{number}", "rvc0"
            host_address, address = f"{SUBNET}.{number}.1", f"{SUBNET}.{number}.2"
            try:
                _ip("netns", "add", name)
            except subprocess.CalledProcessError as exc:
                raise ClusterUnavailable(f"cannot make a network namespace: {exc.stderr.strip()}") from exc
            made.append(Namespace(name, address, host_address))
            try:
                _ip("link", "add", host_end, "type", "veth", "peer", "name", own_end, "netns", name)
            except subprocess.CalledProcessError as exc:
                raise ClusterUnavailable(f"cannot make a veth pair: {exc.stderr.strip()}") from exc
            host_ends.append(host_end)
            _ip("addr", "add", f"{host_address}/24", "dev", host_end)
            _ip("link", "set", host_end, "up")
            for args in (("addr", "add", f"{address}/24", "dev", own_end), ("link", "set", own_end, "up")):
                _ip("-n", name, *args)
            _ip("-n", name, "link", "set", "lo", "up")  # the worker's own verifier server listens there
        yield made
    finally:
        for namespace in made:
            stop_namespace_processes(namespace)
            with contextlib.suppress(subprocess.CalledProcessError):
                _ip("netns", "del", namespace.name)  # takes its end of the veth pair, and so the pair, with it
        for host_end in host_ends:  # in case the namespace went first and left it
            with contextlib.suppress(subprocess.CalledProcessError):
                _ip("link", "del", host_end)


def _remove_stale_namespaces() -> None:
    """The namespaces of runs of these tests whose process is gone (killed before it could remove them): their
    addresses would clash with ours."""
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False).stdout
    for line in listed.splitlines():
        name = line.split()[0] if line.split() else ""
        if (match := NAMESPACE_NAME.fullmatch(name)) and not Path(f"/proc/{match.group(1)}").exists():
            namespace = Namespace(name, "", "")
            stop_namespace_processes(namespace)
            with contextlib.suppress(subprocess.CalledProcessError):
                _ip("netns", "del", name)


def stop_namespace_processes(namespace: Namespace) -> None:
    """SIGKILL every process in the namespace: a host lost at once."""
    listed = subprocess.run(["ip", "netns", "pids", namespace.name], capture_output=True, text=True, check=False)
    for pid in listed.stdout.split():
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid), signal.SIGKILL)


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=30)


@dataclass(frozen=True)
class RedisServer:
    port: int

    def url(self, host: str = "127.0.0.1", db: int = 0) -> str:
        return f"redis://{host}:{self.port}/{db}"


@contextlib.contextmanager
def redis_server(addresses: Sequence[str] = ("127.0.0.1",)) -> Iterator[RedisServer]:
    """Debian's redis-server on ``addresses``, without persistence; stopped and its folder removed on exit."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise ClusterUnavailable("no redis-server (Debian's redis-server package)")
    folder = Path(tempfile.mkdtemp(prefix="reverify-redis-"))
    try:
        for attempt in range(START_ATTEMPTS):
            port = free_port()  # free a moment ago: another process may take it first, hence the attempts
            command = [
                binary,
                "--port", str(port),
                "--bind", " ".join(addresses),
                "--protected-mode", "no",  # no password on a test's own addresses
                "--save", "",
                "--appendonly", "no",
                "--dir", str(folder),
            ]  # fmt: skip
            process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, cwd=folder)
            try:
                _wait_for_port(port, process, "redis-server")
            except RuntimeError:
                stop(process)
                if attempt == START_ATTEMPTS - 1:
                    raise
                continue
            try:
                yield RedisServer(port)
            finally:
                stop(process)
            return
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _wait_for_port(port: int, process: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode} before listening on {port}")
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on {port} within {START_TIMEOUT_S:.0f} s")


def deployment_env(
    home: Path, celery_config: Path, postgres: PostgresServer, redis: RedisServer, reach: str = "127.0.0.1"
) -> dict[str, str]:
    """The variables docs/scale-out.md has every machine set, for one that reaches PostgreSQL and Redis at
    ``reach`` (a namespace's host address, or loopback)."""
    return {
        "DAGSTER_HOME": str(home),
        "REVERIFY_EXECUTOR_CONFIG": str(celery_config),
        "PATH": f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}",
        **postgres.env(),
        "REVERIFY_PG_HOST": reach,
        "REVERIFY_CELERY_BROKER": redis.url(reach, 0),
        "REVERIFY_CELERY_BACKEND": redis.url(reach, 1),
    }


def celery_worker(
    name: str,
    celery_config: Path,
    env: Mapping[str, str],
    *,
    cwd: Path,
    log: Path,
    namespace: Namespace | None = None,
) -> subprocess.Popen[bytes]:
    """A dagster-celery worker named ``name`` running one step at a time, in ``namespace`` if given; its output
    in ``log``. Stop it with ``stop``."""
    command = [
        str(VENV_BIN / "dagster-celery"), "worker", "start",
        "-A", "dagster_celery.app",
        "-y", str(celery_config),
        "-n", name,
        "--", "--concurrency=1", "--without-gossip", "--without-mingle",
    ]  # fmt: skip
    if namespace is not None:
        command = namespace.command(["env", *(f"{key}={value}" for key, value in env.items()), *command])
    with open(log, "ab") as out:
        return subprocess.Popen(
            command, env={**os.environ, **env}, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def dagster_daemon(workspace: Path, env: Mapping[str, str], *, log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen(
            [str(VENV_BIN / "dagster-daemon"), "run", "-w", str(workspace)],
            env={**os.environ, **env},
            cwd=workspace.parent,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def stop(process: subprocess.Popen[bytes], grace_s: float = 10.0) -> None:
    """SIGTERM the process and everything it started, then SIGKILL what is left after ``grace_s``. A process
    started in a session of its own (as every one here) is stopped with its whole group, even when it has ended
    and left children behind; one already waited for is left alone (its pid may be another's by now)."""
    if process.returncode is not None:
        return
    tree = descendants(process.pid)
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):  # not a group leader
        process.terminate()
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)  # the group outlives its leader while a member lives
    kill_all(tree)
