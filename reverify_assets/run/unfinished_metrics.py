"""What a run whose server gave no aggregate metrics tells its user: the rows are safe, and how to finish.

By then every row is verified and written: only the metrics are missing, and ``reverify aggregate`` over the
output computes them where the run would have (without the run's plan, its coverage cannot say how many rows
were expected), without verifying anything again.
"""

from __future__ import annotations

import glob
import shlex
from collections.abc import Sequence
from pathlib import Path

from reverify_assets.files.names import aggregate_metrics_path, sidecar_path
from reverify_assets.processes import secrets as process_secrets


def finish_command(
    config_paths: Sequence[str], overrides: Sequence[str], output: Path, *, allow_mixed_configs: bool
) -> str:
    """``reverify aggregate`` of ``output`` alone, with the run's config: the metrics of every row the run wrote
    (its coverage without the run's plan: the expected total is unknown). The output is its own only shard
    (``--input-glob`` is a glob, so the name is escaped)."""
    words = ["reverify", "aggregate"]
    for path in config_paths:
        words += ["--config", path]
    # An override holding a secret (an API key given on the command line) is not repeated: this message reaches
    # Dagster's event log, which keeps it as it is.
    kept = [override for override in overrides if process_secrets.redact(override) == override]
    words += ["--input-glob", glob.escape(str(output)), "--output", str(output), *kept]
    if allow_mixed_configs:
        words.append("--allow-mixed-configs")
    command = shlex.join(words)
    if len(kept) < len(overrides):
        command += " (and the run's overrides that hold a secret, left out here)"
    return command


def unfinished_metrics_message(reason: str, output: Path, rows: int, command: str) -> str:
    """One paragraph: why the metrics are missing, where the rows are, and the command that finishes the run."""
    return (
        f"{reason.rstrip('.')}. Every verified row is kept: {rows} rows in {output}, the failures in "
        f"{sidecar_path(output)}; only {aggregate_metrics_path(output)} was not written. Once the "
        f"server's metrics work, finish the run with: {command}"
    )
