"""Whether the Celery side of a deployment can take a backfill, asked before one is submitted: the broker and the
result backend answer, and a worker listens on the queue the steps go to. Each fault is one line naming the
service and its address; without these checks the backfill's runs would wait on a queue nobody reads, or fail
in the daemon's log with a traceback.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from reverify_assets.defs.deployment import EXECUTOR_CONFIG_ENV, celery_executor_config
from reverify_assets.errors import ConfigError, StateError

STEP_QUEUE = "dagster"  # dagster-celery's queue for every step, unless a step's tag names another
INSPECT_S = 1.0  # one round of asking the workers; repeated until the wait is over
URL_KEYS = ("broker", "backend")
DAGSTER_CELERY_DEFAULT = {"broker": "pyamqp://guest@localhost:5672//", "backend": "rpc://"}  # dagster-celery's own
CONNECT_TIMEOUT_S = 5.0
CONNECT_TIMEOUTS = {"socket_connect_timeout": CONNECT_TIMEOUT_S, "socket_timeout": CONNECT_TIMEOUT_S}


def check_celery_workers(config_path: Path, *, wait_s: float) -> list[str]:
    """The names of the workers listening on the steps' queue, waiting up to ``wait_s`` for one; raises
    ConfigError when the broker or the backend cannot be reached, StateError when no worker answers in time or
    one runs with other Celery settings."""
    # dagster-celery is an extra: imported only for a deployment that names Celery.
    from dagster_celery.executor import CeleryExecutor
    from dagster_celery.make_app import make_app
    from kombu.utils.url import maybe_sanitize_url

    config = _resolved(config_path, celery_executor_config(config_path))
    app = make_app(CeleryExecutor.for_cli(**config).app_args())
    # An address that drops packets: a connect gives up after this, not after the system's two minutes.
    app.conf.broker_transport_options = {**app.conf.broker_transport_options, **CONNECT_TIMEOUTS}
    app.conf.redis_socket_connect_timeout = CONNECT_TIMEOUT_S
    broker, backend = (maybe_sanitize_url(str(config.get(key) or DAGSTER_CELERY_DEFAULT[key])) for key in URL_KEYS)
    try:
        try:
            app.connection_for_write().ensure_connection(max_retries=1, timeout=CONNECT_TIMEOUT_S)
        except Exception as exc:  # kombu's OperationalError, or the transport's own
            raise ConfigError(
                f"cannot reach the Celery broker at {broker} (from {config_path}): {_first_line(exc)}",
                key="execution.config.broker",
                source=str(config_path),
            ) from exc
        try:
            app.backend.client.ping()
        except AttributeError:
            pass  # a backend without a client to ask (not Redis): its first result will tell
        except Exception as exc:
            raise ConfigError(
                f"cannot reach the Celery result backend at {backend} (from {config_path}): {_first_line(exc)}",
                key="execution.config.backend",
                source=str(config_path),
            ) from exc
        deadline = time.monotonic() + wait_s
        listening = _listening(app)
        while not listening and time.monotonic() < deadline:
            listening = _listening(app)  # each round waits INSPECT_S for replies
        if not listening:
            raise StateError(
                f"no Celery worker is listening on queue {STEP_QUEUE!r} at {broker}: waited {wait_s:.0f} s. Start "
                f"one where the project is: dagster-celery worker start -A dagster_celery.app -y {config_path}. A "
                "worker that cannot reach PostgreSQL or Redis exits as it starts: see its output."
            )
        settings = _settings(app, listening, deadline)
    finally:
        app.close()
    for worker, worker_settings in settings.items():
        if differences := config_differences(config, worker_settings):
            raise StateError(
                f"Celery worker {worker} runs with another config than {config_path}: {'; '.join(differences)}. "
                f"Restart it with -y {config_path}",
                path=config_path,
            )
    return listening


def _settings(app: Any, workers: list[str], deadline: float) -> dict[str, dict[str, Any]]:
    """The Celery settings of each of ``workers`` that answers by ``deadline`` (once more at least): a worker too
    busy to answer is not judged."""
    answered: dict[str, dict[str, Any]] = {}
    while True:
        waiting = [worker for worker in workers if worker not in answered]
        answered.update(app.control.inspect(timeout=INSPECT_S, destination=waiting).conf(with_defaults=False) or {})
        if len(answered) == len(workers) or time.monotonic() >= deadline:
            return answered


def config_differences(config: dict[str, Any], worker: dict[str, Any]) -> list[str]:
    """Where a worker's Celery settings differ from ``config``'s: its ``config_source``, and the backend's kind and
    database (not its address, by which each machine reaches the same server its own way)."""
    differences = [
        f"{key} {worker.get(key)!r} (here {value!r})"
        for key, value in sorted((config.get("config_source") or {}).items())
        if worker.get(key) != value
    ]
    ours = urlsplit(str(config.get("backend") or DAGSTER_CELERY_DEFAULT["backend"]))
    theirs = urlsplit(str(worker.get("result_backend") or ""))
    if (ours.scheme, ours.path) != (theirs.scheme, theirs.path):  # the kind, and Redis's database number
        differences.append(
            f"result backend {theirs.scheme or 'none'}://…{theirs.path} (here {ours.scheme}://…{ours.path})"
        )
    return differences


def _resolved(config_path: Path, config: dict[str, Any]) -> dict[str, Any]:
    """The config with its URLs' ``env:`` references read from this process's environment, as the run and the
    workers read them in theirs."""
    resolved = dict(config)
    for key in URL_KEYS:
        value = config.get(key)
        if isinstance(value, dict) and set(value) == {"env"}:
            name = str(value["env"])
            if not os.environ.get(name):
                raise ConfigError(
                    f"{name} is not set: the Celery config {config_path} (named by {EXECUTOR_CONFIG_ENV}) takes "
                    f"execution.config.{key} from it",
                    key=name,
                    source=str(config_path),
                )
            resolved[key] = os.environ[name]
    return resolved


def _listening(app: Any) -> list[str]:
    queues = app.control.inspect(timeout=INSPECT_S).active_queues() or {}
    return sorted(worker for worker, consumed in queues.items() if any(q.get("name") == STEP_QUEUE for q in consumed))


def _first_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split("\n", 1)[0].split())
    return text or type(exc).__name__
