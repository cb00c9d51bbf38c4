"""A throwaway PostgreSQL cluster owned by one test: its own data folder, port and socket, removed afterwards.

Nothing here touches a system cluster (``pg_ctlcluster``, ``/var/run/postgresql``): the test's server lives in a
temporary folder, listens on a free loopback port and puts its unix socket beside its data, so tests can run
next to a developer's own PostgreSQL and in parallel with each other.

PostgreSQL refuses to run as root. When the tests run as root (CI does), the cluster is created and run by
the ``postgres`` OS user the Debian package creates; its folder is a fresh ``mkdtemp`` under the system temp
folder, because pytest's ``tmp_path`` sits below a root-only (0700) folder that user cannot enter.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

SERVICE_USER = "postgres"  # created by Debian's postgresql package; owns clusters when we are root
DEBIAN_BIN_GLOB = "/usr/lib/postgresql/*/bin"  # Debian keeps the server tools off PATH, one folder per major version
TOOLS = ("initdb", "pg_ctl", "createdb")


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL server binaries on this machine (the caller decides between skip and fail)."""


@dataclass(frozen=True)
class PostgresServer:
    """How to reach the throwaway server (the values a ``dagster.yaml`` reads from the environment)."""

    host: str
    port: int
    user: str
    password: str
    database: str
    socket_dir: Path

    def env(self) -> dict[str, str]:
        """The variables ``deploy/dagster.postgres.yaml`` reads, pointing at this server."""
        return {
            "REVERIFY_PG_HOST": self.host,
            "REVERIFY_PG_PORT": str(self.port),
            "REVERIFY_PG_USER": self.user,
            "REVERIFY_PG_PASSWORD": self.password,
            "REVERIFY_PG_DB": self.database,
        }

    def libpq_env(self) -> dict[str, str]:
        """The same connection for libpq tools (psql, createdb)."""
        return {
            "PGHOST": self.host,
            "PGPORT": str(self.port),
            "PGUSER": self.user,
            "PGPASSWORD": self.password,
            "PGDATABASE": self.database,
        }


def find_bin_dir() -> Path:
    """The folder holding initdb, pg_ctl and createdb: PATH first, else the newest Debian versioned folder."""
    on_path = [shutil.which(tool) for tool in TOOLS]
    if all(on_path):
        # Resolve symlinks (e.g. /usr/local/bin/initdb -> /usr/lib/postgresql/15/bin/initdb) so every tool
        # comes from the same installation.
        return Path(os.path.realpath(str(on_path[0]))).parent
    candidates = sorted(glob.glob(DEBIAN_BIN_GLOB), key=_major_version, reverse=True)
    for folder in candidates:
        if all((Path(folder) / tool).is_file() for tool in TOOLS):
            return Path(folder)
    raise PostgresUnavailable(
        f"no PostgreSQL server binaries ({', '.join(TOOLS)}) on PATH or in {DEBIAN_BIN_GLOB}; "
        "install them with `apt-get install -y postgresql`"
    )


def check_available() -> Path:
    """The binaries' folder, or PostgresUnavailable saying what is missing (binaries, or a user to run them)."""
    bin_dir = find_bin_dir()
    _cluster_owner()
    return bin_dir


def _major_version(folder: str) -> int:
    name = Path(folder).parent.name
    return int(name) if name.isdigit() else -1


def free_port() -> int:
    """A port nothing listens on right now (the server binds it moments later; start retries on a clash)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def throwaway_postgres(
    database: str = "reverify_test", *, start_attempts: int = 3, also_on: Sequence[str] = ()
) -> Iterator[PostgresServer]:
    """Create a cluster, start it, create ``database``; always stop the server and delete the folder.
    ``also_on``: addresses it listens on besides loopback (a test's own network namespaces), each letting in
    its /24 with the password."""
    bin_dir = find_bin_dir()
    owner = _cluster_owner()
    folder = Path(tempfile.mkdtemp(prefix="reverify-pg-"))  # short path: unix socket paths are capped at 107 bytes
    data, socket_dir, log = folder / "data", folder / "socket", folder / "server.log"
    password = f"pw-{os.getpid()}-{os.urandom(6).hex()}"
    started = False
    try:
        socket_dir.mkdir()
        pwfile = folder / "pwfile"
        pwfile.write_text(password + "\n")
        if owner is not None:
            # The service user must own everything the server writes; it cannot enter a root-only folder.
            for path in (folder, socket_dir, pwfile):
                os.chown(path, owner.pw_uid, owner.pw_gid)
        # scram-sha-256 for every connection (no trust): the test proves the password reaches PostgreSQL from
        # the dagster.yaml's env var, as it must on a shared server.
        _run(
            owner,
            [
                str(bin_dir / "initdb"),
                "--pgdata",
                str(data),
                "--username",
                "reverify",
                "--pwfile",
                str(pwfile),
                "--auth",
                "scram-sha-256",
                "--encoding",
                "UTF8",
                "--no-locale",  # the C locale: no dependency on which locales the machine generated
                "--no-sync",  # a throwaway cluster need not survive a power cut; saves seconds
            ],
            cwd=folder,
        )
        if also_on:
            with open(data / "pg_hba.conf", "a") as hba:
                for address in also_on:
                    subnet = ".".join(address.split(".")[:3]) + ".0/24"
                    hba.write(f"host all all {subnet} scram-sha-256\n")
        port = 0
        for attempt in range(start_attempts):
            port = free_port()
            options = " ".join(
                [
                    f"-c listen_addresses={','.join(['127.0.0.1', *also_on])}",
                    f"-c port={port}",
                    f"-c unix_socket_directories={socket_dir}",
                    # Durability settings off: the data dies with the test, and fsync per commit would
                    # dominate the run time of Dagster's many small event writes.
                    "-c fsync=off",
                    "-c synchronous_commit=off",
                    "-c full_page_writes=off",
                ]
            )
            command = [str(bin_dir / "pg_ctl"), "start", "-w", "-t", "30", "-D", str(data), "-l", str(log)]
            try:
                _run(owner, [*command, "-o", options], cwd=folder)
                started = True
                break
            except subprocess.CalledProcessError:
                if attempt == start_attempts - 1:
                    raise
        server = PostgresServer("127.0.0.1", port, "reverify", password, database, socket_dir)
        subprocess.run(
            [str(bin_dir / "createdb"), database],
            env={**os.environ, **server.libpq_env(), "PGDATABASE": "postgres"},
            check=True,
            capture_output=True,
            text=True,
            timeout=60,
        )
        yield server
    except subprocess.CalledProcessError as exc:
        server_log = log.read_text(errors="replace")[-4000:] if log.exists() else "(no server log)"
        raise RuntimeError(
            f"{' '.join(map(str, exc.cmd))} failed ({exc.returncode}):\n{exc.stdout}\n{exc.stderr}\n"
            f"server log:\n{server_log}"
        ) from exc
    finally:
        if started:
            # immediate: no checkpoint for data we delete next; the server must be gone before the folder is.
            with contextlib.suppress(subprocess.CalledProcessError, subprocess.TimeoutExpired):
                _run(owner, [str(bin_dir / "pg_ctl"), "stop", "-w", "-m", "immediate", "-D", str(data)], cwd=folder)
        shutil.rmtree(folder, ignore_errors=True)


def _cluster_owner() -> pwd.struct_passwd | None:
    """The OS user to run PostgreSQL as: None (ourselves) unless we are root, which PostgreSQL refuses."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(SERVICE_USER)
    except KeyError as exc:
        raise PostgresUnavailable(
            f"running as root and there is no {SERVICE_USER!r} OS user to own the test's PostgreSQL cluster "
            "(PostgreSQL refuses to run as root; `apt-get install -y postgresql` creates that user)"
        ) from exc


def _run(owner: pwd.struct_passwd | None, command: Sequence[str], *, cwd: Path) -> subprocess.CompletedProcess[str]:
    # cwd inside the cluster folder: initdb and pg_ctl fail when the service user cannot read the cwd.
    if owner is None:
        return subprocess.run(list(command), cwd=cwd, check=True, capture_output=True, text=True, timeout=120)
    # Drop to the service user for this command only (setgid, setgroups, setuid in the child before exec).
    return subprocess.run(
        list(command),
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
        user=owner.pw_uid,
        group=owner.pw_gid,
        extra_groups=[],
    )
