"""Running the installed ``reverify`` command as a user would, and writing small NeMo Gym files."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from tests.support.process_tree import run_reaped

if TYPE_CHECKING:
    from tests.support.fake_verifier import FakeVerifier

REVERIFY = str(Path(sys.executable).parent / "reverify")
# A ceiling for any CLI call in a test, never a measure of speed: CI has been seen 5x slower than a quiet machine.
CLI_LIMIT_S = 900
ROOT = Path(__file__).resolve().parents[2]
CONFORMANCE = ROOT / "tests" / "data" / "conformance" / "mcqa"
MCQA_CONFIG = ROOT / "configs" / "mcqa.yaml"
CONFORMANCE_INPUTS = CONFORMANCE / "rollouts_materialized_inputs.jsonl"
CONFORMANCE_ROLLOUTS = CONFORMANCE / "rollouts.jsonl"


def reverify_env(home: Path) -> dict[str, str]:
    return {**os.environ, "DAGSTER_HOME": str(home)}


def run_reverify(
    *args: str | Path, home: Path, timeout: float = CLI_LIMIT_S, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return run_reaped([REVERIFY, *map(str, args)], env=reverify_env(home), timeout=timeout, cwd=cwd)


def start_reverify(*args: str | Path, home: Path, **popen: Any) -> subprocess.Popen:
    """``reverify`` in the background, for tests that interrupt or kill it."""
    return subprocess.Popen([REVERIFY, *map(str, args)], env=reverify_env(home), **popen)


def start_piped(*args: str | Path, home: Path) -> subprocess.Popen[str]:
    """``reverify`` in the background, its output kept for ``communicate``."""
    return start_reverify(*args, home=home, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def run_args(config: Path, inputs: Path, rollouts: Path, output: Path, *flags: str) -> list[str | Path]:
    """The arguments of ``reverify run`` on these files."""
    return ["run", "--config", config, "--inputs", inputs, "--rollouts", rollouts, "--output", output, *flags]


def run_with_config(
    config: Path, inputs: Path, rollouts: Path, output: Path, *flags: str, home: Path
) -> subprocess.CompletedProcess[str]:
    return run_reverify(*run_args(config, inputs, rollouts, output, *flags), home=home)


def run_against(
    tmp_path: Path,
    server: FakeVerifier,
    inputs: Path,
    rollouts: Path,
    output: Path,
    *flags: str,
    home: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """``reverify run`` with a config (written to ``tmp_path``) naming ``server``; Dagster home ``tmp_path / "h"``."""
    config = url_config(tmp_path, server.url)
    return run_with_config(config, inputs, rollouts, output, *flags, home=home or tmp_path / "h")


def run_mcqa(
    output: Path,
    *flags: str,
    home: Path,
    inputs: Path = CONFORMANCE_INPUTS,
    rollouts: Path = CONFORMANCE_ROLLOUTS,
) -> subprocess.CompletedProcess[str]:
    """``reverify run`` with the built-in mcqa server, on the conformance files unless told otherwise."""
    return run_with_config(MCQA_CONFIG, inputs, rollouts, output, *flags, home=home)


def row_key(row: dict[str, Any]) -> tuple[int, int]:
    return row["_ng_task_index"], row["_ng_rollout_index"]


def row_keys(rows: Iterable[dict[str, Any]]) -> list[tuple[int, int]]:
    return [row_key(row) for row in rows]


PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def scored_row(task: int, rollout: int, reward: float, config: str) -> dict[str, Any]:
    """A reverified row of agent ``agent`` scored by verifier config ``config``."""
    return {
        "_ng_task_index": task,
        "_ng_rollout_index": rollout,
        "reward": reward,
        "agent_ref": {"name": "agent"},
        "reverify_provenance": {"config_hash": config},
    }


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
