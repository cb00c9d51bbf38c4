"""Where the code location's runs execute their steps, as the deployment says: in each run's own process
(Dagster's default executor), or on Celery workers when ``REVERIFY_EXECUTOR_CONFIG`` names a Celery config
(``deploy/celery/celery.yaml``, the file the workers start with too).

An operator picks the executor by configuration, the same code everywhere: the variable is set where the code
location loads (the daemon and its runs, the UI) and read as it loads. The CLI's own runs (``reverify run``, a
local ``reverify backfill``) execute in its process whatever it says; ``reverify backfill --submit`` reads it to
check the workers before it submits (``celery_workers``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import dagster as dg
import yaml

from reverify_assets.errors import ConfigError

EXECUTOR_CONFIG_ENV = "REVERIFY_EXECUTOR_CONFIG"
CELERY_EXECUTOR_NAME = "reverify_celery"


def deployment_executor() -> dg.ExecutorDefinition | None:
    """The executor ``REVERIFY_EXECUTOR_CONFIG`` asks for, or None for Dagster's default."""
    named = os.environ.get(EXECUTOR_CONFIG_ENV, "").strip()
    if not named:
        return None
    path = Path(named)
    config = celery_executor_config(path)
    try:
        from dagster_celery import celery_executor
    except ImportError as exc:
        raise ConfigError(
            f"{EXECUTOR_CONFIG_ENV}={path} asks for Celery workers, but dagster-celery is not installed here: "
            "pip install 'reverify-assets[celery]'",
            key=EXECUTOR_CONFIG_ENV,
        ) from exc
    return celery_executor.configured(config, name=CELERY_EXECUTOR_NAME)


def celery_executor_config(path: Path) -> dict[str, Any]:
    """The ``execution: config:`` block of a Celery config file, as ``dagster-celery worker start -y`` reads it.
    Its values stay as written (``env:`` references included): each process resolves them in its own
    environment, so that each machine reaches Redis by its own address."""
    where = f"{path} (named by {EXECUTOR_CONFIG_ENV})"
    try:
        loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read the Celery config {where}: {exc.strerror or exc}", source=str(path)) from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"the Celery config {where} is not valid YAML: {exc}", source=str(path)) from exc
    execution = loaded.get("execution") if isinstance(loaded, Mapping) else None
    config = execution.get("config") if isinstance(execution, Mapping) else None
    if not isinstance(config, Mapping) or not config.get("broker"):
        raise ConfigError(
            f"the Celery config {where} has no `execution: config: broker:`; it must hold the block "
            "dagster-celery's workers read (see deploy/celery/celery.yaml)",
            key="execution.config.broker",
            source=str(path),
        )
    return dict(config)
