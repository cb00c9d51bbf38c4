"""Synthetic rows of NeMo Gym's circle_count, for the speed of a second NeMo Gym server (`run_benchmark.py
--gym-server circle_count`): a server whose metrics hooks are NeMo Gym's defaults.

Made from the five examples NeMo Gym ships with it (tests/data/nemo_gym_servers/circle_count, as `gym eval run`
wrote them): task i takes example i % 5's prompt and image, and has circles and a target colour of its own; each of
its rollouts answers `\\boxed{n}`, the right count about 60 % of the time. The server grades from the circles and
the answer, never the image. Seeded: the same arguments give the same files.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from reverify_assets.synthetic.mcqa_rollouts import INPUTS_FILE_NAME, ROLLOUTS_FILE_NAME
from reverify_assets.synthetic.nemo_gym_rows import write_jsonl_atomically

EXAMPLES = Path(__file__).resolve().parents[1] / "tests" / "data" / "nemo_gym_servers" / "circle_count"
CONFIG = EXAMPLES / "config.yaml"
COLORS = ("red", "green", "blue", "yellow", "orange", "purple", "pink", "cyan")
RIGHT_SHARE = 0.6


def _examples() -> list[tuple[dict[str, Any], dict[str, Any]]]:
    inputs = [orjson.loads(line) for line in (EXAMPLES / INPUTS_FILE_NAME).read_bytes().splitlines()]
    rollouts = [orjson.loads(line) for line in (EXAMPLES / ROLLOUTS_FILE_NAME).read_bytes().splitlines()]
    return list(zip(inputs, rollouts, strict=True))


def _rows(tasks: int, rollouts_per_task: int, seed: int) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    rng = random.Random(seed)
    examples = _examples()
    for task in range(tasks):
        example_input, example_rollout = examples[task % len(examples)]
        circles = [
            {"x": rng.randrange(1000), "y": rng.randrange(1000), "radius": rng.randrange(20, 60)}
            | {"color": rng.choice(COLORS)}
            for _ in range(rng.randrange(3, 20))
        ]
        target = rng.choice(COLORS)
        count = sum(1 for circle in circles if circle["color"] == target)
        for rollout in range(rollouts_per_task):
            keys = {"_ng_task_index": task, "_ng_rollout_index": rollout}
            row_input = {**example_input, "circles": circles, "target_color": target, **keys}
            answer = count if rng.random() < RIGHT_SHARE else rng.randrange(0, 12)
            response = copy.deepcopy(example_rollout["response"])
            text = f"Counting only the {target} circles, there are {answer}.\n\n\\boxed{{{answer}}}"
            response["output"][-1]["content"][0]["text"] = text
            reward = 1.0 if answer == count else 0.0
            row_rollout = {
                **example_rollout,
                "response": response,
                "reward": reward,
                "predicted_count": answer,
                "expected_count": count,
                "correct": bool(reward),
                **keys,
            }
            yield row_input, row_rollout


def write_circle_count_dataset(directory: Path, tasks: int, rollouts_per_task: int, seed: int) -> None:
    """The two files `gym eval run` would have written for these rollouts, in `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    write_jsonl_atomically(
        directory / INPUTS_FILE_NAME,
        (row for row, _ in _rows(tasks, rollouts_per_task, seed)),
    )
    write_jsonl_atomically(
        directory / ROLLOUTS_FILE_NAME,
        (row for _, row in _rows(tasks, rollouts_per_task, seed)),
    )
