"""What assets hand each other through Dagster's IO manager: paths and counts, never rows."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import dagster as dg
from pydantic import BaseModel

from reverify_assets.processes.prefetch import PrefetchedWork


class IndexHandle(BaseModel):
    source: str  # the JSONL file indexed
    index: str  # the parquet file holding its key index
    rows: int
    routes: list[dict[str, Any]] = []


class PlanHandle(BaseModel):
    inputs: str
    rollouts: str
    plan: str  # parquet: key, byte offsets of both rows, server instance; sorted by key
    rows: int
    config_hash: str


class OutputHandle(BaseModel):
    path: str
    rows: int
    config_hash: str
    key_metrics: dict[str, dict[str, Any]] = {}  # per agent, for metrics files: their headline figures
    coverage: dict[str, dict[str, Any]] = {}  # per agent, for metrics files: the entry's coverage block
    provenance: dict[str, dict[str, Any]] = {}  # per agent, for metrics files: the entry's provenance block
    computed_by: dict[str, str] = {}  # per server, for metrics files: where its metrics were computed
    written_this_run: int = 0  # of `rows`, those this run added (resume and --append add to a file)


def work_dir(context: dg.AssetExecutionContext) -> Path:
    """Per-run scratch space for key indexes, inside the Dagster instance's own directory."""
    path = Path(context.instance.root_directory) / "reverify_work" / context.run_id
    path.mkdir(parents=True, exist_ok=True)
    return path


def content_version(*paths: Path, prefetched: PrefetchedWork | None = None) -> dg.DataVersion:
    """``prefetched``: where the command's start-up may have begun the files' digests."""
    work = prefetched or PrefetchedWork()
    digest = hashlib.sha256()
    for path in paths:
        digest.update(work.file_digest(path))
    return dg.DataVersion(digest.hexdigest()[:16])


class MergedShardsHandle(BaseModel):
    """What ``reverify aggregate`` made: the merged output (unless the glob named only it) and its metrics."""

    output: str
    metrics: str | None  # None: no row carries an agent name, no metrics written
    rows: int
    shards: int
    merged: bool
    key_metrics: dict[str, dict[str, Any]] = {}  # per agent, as for metrics files
    coverage: dict[str, dict[str, Any]] = {}
    provenance: dict[str, dict[str, Any]] = {}
    computed_by: dict[str, str] = {}  # per server, as for metrics files
    health: list[str] = []  # the lines of NeMo Gym's rollout health report, or why there is none
