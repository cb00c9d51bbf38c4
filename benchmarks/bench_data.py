"""The benchmark's data: a NeMo-Gym-format mcqa run generated once (seeded) or reused, and read into the
page cache before it is timed."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from bench_lock import exclusive

from reverify_assets.synthetic.mcqa_rollouts import (
    INPUTS_FILE_NAME,
    ROLLOUTS_FILE_NAME,
    SyntheticSpec,
    write_mcqa_dataset,
)

__all__ = ["Dataset", "count_lines", "prepare_data", "read_through"]


def count_lines(path: Path) -> int:
    lines = 0
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 22):
            lines += chunk.count(b"\n")
    return lines


@dataclass(frozen=True)
class Dataset:
    inputs: Path
    rollouts: Path
    rows: int

    @property
    def megabytes(self) -> tuple[float, float]:
        return self.rollouts.stat().st_size / 1e6, self.inputs.stat().st_size / 1e6


def prepare_data(directory: Path, spec: SyntheticSpec) -> Dataset:
    inputs, rollouts = directory / INPUTS_FILE_NAME, directory / ROLLOUTS_FILE_NAME
    if inputs.is_file() and rollouts.is_file():
        rows = count_lines(rollouts)
        print(f"reusing {rows:,} rows in {directory} (the size and seed options do not apply to them)")
        return Dataset(inputs, rollouts, rows)
    # Generation is CPU-heavy too (tens of seconds at 100k rows): it would slow another benchmark's figures.
    with exclusive(f"generating {spec.rows:,} rows"):
        started = time.perf_counter()
        write_mcqa_dataset(directory, spec)
    print(
        f"generated {spec.rows:,} rows ({spec.tasks:,} tasks × {spec.rollouts_per_task}, seed {spec.seed}) "
        f"in {time.perf_counter() - started:.1f} s into {directory}"
    )
    return Dataset(inputs, rollouts, spec.rows)


def read_through(*paths: Path) -> float:
    """Seconds to read ``paths`` once. This sandbox keeps only a few GB of page cache, so 1M rows' 4.2 GB may be
    on disk when a run starts: its scans then wait on reads (about 130 MB/s here), and one such run's start-up
    took 21.5 s instead of 13-15 s."""
    started = time.perf_counter()
    chunk = bytearray(16 << 20)
    for path in paths:
        with path.open("rb", buffering=0) as fh:
            while fh.readinto(chunk):
                pass
    return time.perf_counter() - started
