"""NeMo Gym's own `gym eval reverify` on the benchmark's files, for `run_benchmark.py --vs-nemo-gym GYM`.

It runs with the same config (`configs/mcqa.yaml`, NeMo Gym's resources-server-only shape), grading mode and
concurrency as `reverify run`, from the folder that holds NeMo Gym's `resources_servers/` (NeMo Gym finds a
server's code and its venv there). `++skip_venv_if_present=true`: a server venv already in place is used as
it is, else NeMo Gym builds one with `uv`, as it always does. Wall time and the peak memory of the whole
process tree (Ray and the server included) are measured from outside, as for `reverify run`. Both outputs'
mean reward is summed exactly (`math.fsum`: NeMo Gym writes rows in the order they settle).
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

import orjson
from bench_data import Dataset
from pipeline_run import GRADING_MODE_KEY, MCQA_CONFIG
from process_memory import TreeReport, TreeSampler


@dataclass
class NemoGymRun:
    rows: int
    wall_s: float
    mean_reward: float | None
    memory: TreeReport
    output: Path

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.wall_s

    @property
    def metrics(self) -> Path:
        return self.output.with_name(f"{self.output.stem}_aggregate_metrics.json")


def nemo_gym_root(gym: Path) -> Path:
    """The folder holding NeMo Gym's `resources_servers/`, as the Python beside `gym` imports it."""
    python = gym.parent / "python"
    found = subprocess.run(
        [str(python), "-c", "import os, resources_servers; print(os.path.dirname(resources_servers.__path__[0]))"],
        capture_output=True,
        text=True,
        check=False,
    )
    if found.returncode != 0:
        raise RuntimeError(f"{python} cannot import NeMo Gym's resources_servers: {found.stderr.strip()[-500:]}")
    return Path(found.stdout.strip())


def run_nemo_gym(
    gym: Path,
    data: Dataset,
    work: Path,
    concurrency: int,
    grading_mode: str | None,
    config: Path = MCQA_CONFIG,
    force: bool = False,
) -> NemoGymRun:
    """``grading_mode``: mcqa's (None: another server's config); ``force``: its files are named ``unsafe_*``."""
    out_dir = work / "nemo_gym"
    out_dir.mkdir(parents=True)
    asked = out_dir / "reverified.jsonl"
    output = asked.with_name(f"unsafe_{asked.name}") if force else asked
    options = [] if grading_mode is None else [f"++{GRADING_MODE_KEY}={grading_mode}"]
    options += ["--force"] if force else []
    command = [
        str(gym), "eval", "reverify", "--config", str(config), "--inputs", str(data.inputs),
        "--rollouts", str(data.rollouts), "--output", str(asked), "--concurrency", str(concurrency),
        *options, "++skip_venv_if_present=true",
        # Hydra's run folder, which defaults to `outputs/` in the working directory: NeMo Gym's own install here.
        f"hydra.run.dir={out_dir / 'hydra'}",
    ]  # fmt: skip
    root = nemo_gym_root(gym)
    log = out_dir / "gym.log"
    print(f"$ (cd {root} && {' '.join(command)})", flush=True)
    with log.open("wb") as sink:
        started = time.perf_counter()
        # NeMo Gym's server prints a line per request: to a file, not to a pipe nobody empties. Its own session:
        # `gym eval reverify` leaves its resources server running when it exits, which would load the next runs.
        process = subprocess.Popen(
            command, cwd=root, stdout=sink, stderr=subprocess.STDOUT, env=dict(os.environ), start_new_session=True
        )
        try:
            with TreeSampler(process.pid) as sampler:
                process.wait()
                wall_s = time.perf_counter() - started
        finally:
            with suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    if process.returncode != 0:
        tail = log.read_text(errors="replace")[-4000:]
        raise RuntimeError(f"`gym eval reverify` exited {process.returncode} (log {log}):\n{tail}")
    rows, mean = mean_reward(output)
    return NemoGymRun(rows, wall_s, mean, sampler.report(), output)


def mean_reward(path: Path) -> tuple[int, float | None]:
    """Rows and mean reward of an output file, summed exactly: the same whatever the rows' order."""
    rows = 0

    def rewards() -> Iterator[float]:
        nonlocal rows
        with path.open("rb") as fh:
            for line in fh:
                rows += 1
                reward = orjson.loads(line).get("reward")
                yield float(reward) if isinstance(reward, int | float) else 0.0

    total = math.fsum(rewards())
    return rows, (total / rows if rows else None)


def metrics_sections_compared(ours: Path, theirs: Path) -> dict[str, bool]:
    """Each section of NeMo Gym's aggregate metrics file, per agent entry: whether ours holds the same values
    (ours has coverage and provenance blocks besides)."""
    mine = {entry["agent_ref"]["name"]: entry for entry in orjson.loads(ours.read_bytes())}
    compared: dict[str, bool] = {}
    for entry in orjson.loads(theirs.read_bytes()):
        name = entry["agent_ref"]["name"]
        for section, value in entry.items():
            compared[f"{name}: {section}"] = name in mine and mine[name].get(section) == value
    return compared
