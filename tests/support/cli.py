"""Running the installed ``reverify`` command as a user would, and writing small NeMo Gym files."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson

REVERIFY = str(Path(sys.executable).parent / "reverify")
ROOT = Path(__file__).resolve().parents[2]
CONFORMANCE = ROOT / "tests" / "data" / "conformance" / "mcqa"


def run_reverify(
    *args: str | Path, home: Path, timeout: float = 120, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    return subprocess.run(
        [REVERIFY, *map(str, args)], capture_output=True, text=True, env=env, timeout=timeout, cwd=cwd
    )


def write_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))
    return path


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def url_config(tmp_path: Path, url: str, name: str = "fake") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"{name}:\n  resources_servers:\n    some_verifier:\n      url: {url}\n")
    return path


def fake_dataset(tmp_path: Path, behaviours: list[str], agent: str = "agent_a") -> tuple[Path, Path]:
    """One task per behaviour, two rollouts each; rollouts written in reverse (completion) order."""
    inputs, rollouts = [], []
    for task, behaviour in enumerate(behaviours):
        for rollout in range(2):
            key = {"_ng_task_index": task, "_ng_rollout_index": rollout}
            inputs.append(
                {
                    "responses_create_params": {"input": "q"},
                    "behaviour": behaviour,
                    "agent_ref": {"type": "responses_api_agents", "name": agent},
                    **key,
                }
            )
            rollouts.append(
                {
                    "response": {"output": [], "usage": {"input_tokens": 3}},
                    "reward": 0.5,
                    **key,
                    "agent_ref": {"name": agent},
                }
            )
    return (
        write_jsonl(tmp_path / "rollouts_materialized_inputs.jsonl", inputs),
        write_jsonl(tmp_path / "rollouts.jsonl", reversed(rollouts)),
    )
