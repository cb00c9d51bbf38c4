"""Bit-level safety net: answers recorded from the reference implementation on seeded synthetic inputs.

Each case builds its rows from a seed (masked rows, gaps, non-binary rewards, int-only tables, bools,
one rollout index, uneven rollouts, usage, ng_perf, unsorted input, NaN and infinities) and runs one set
of hooks. The recorded file holds, per case, the SHA-256 of ``orjson.dumps(answer)`` (so key order and
every float bit count) plus a readable excerpt to diagnose a mismatch. The answers were recorded with the
implementation of commit f582399, before the streaming rewrite. Regenerate only when the reference answers
are meant to change: ``.venv/bin/python tests/unit/test_metrics_golden.py``.
"""

from __future__ import annotations

import hashlib
import math
import random
import sys
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

import orjson
import pytest

from reverify_assets.metrics import aggregate_metrics, compute_pass_majority_metrics, compute_subset_metrics, mcqa
from reverify_assets.servers.judge import metrics as judge_metrics

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "metrics_golden" / "answers.json"
# An excerpt keeps this many items of every list and entries of every dict, at any depth.
EXCERPT_ITEMS = 2
EXCERPT_ENTRIES = 60

Row = dict[str, Any]
Hooks = dict[str, Callable[..., Any]]


# --- Seeded rows -----------------------------------------------------------------------------------------


def _reward(rnd: random.Random, kind: str) -> Any:
    if kind == "binary":
        return float(rnd.random() < 0.6)
    if kind == "int":
        return int(rnd.random() < 0.6)
    if kind == "bool":
        return rnd.random() < 0.6
    if kind == "fraction":
        return rnd.choice([0.0, 0.25, 0.5, 1.0, 1 / 3, 0.1])
    if kind == "wide":
        return rnd.uniform(-3, 7) * 10 ** rnd.randint(-2, 3)
    if kind == "special":
        return rnd.choice([1.0, 0.0, 0.5, math.nan, math.inf])
    raise ValueError(kind)


def _usage(rnd: random.Random) -> dict[str, Any]:
    output = rnd.randint(5, 900)
    prompt = rnd.randint(50, 400)
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": output // 2},
        "total_tokens": prompt + output,
    }


def _judge_evaluations(rnd: random.Random) -> Any:
    draw = rnd.random()
    if draw < 0.2:
        return None
    if draw < 0.3:
        return []
    issues = [rnd.choice(["no_verdict", "conflicting_verdicts", "truncated", "empty_text"]) for _ in range(2)]
    return [
        {"verdict_label": "[[A=B]]", "judgement_parsing_issues": issues[: rnd.randint(0, 2)]}
        for _ in range(rnd.randint(1, 2))
    ]


def build_rows(
    seed: int,
    *,
    tasks: int = 6,
    rollouts: tuple[int, int] = (4, 4),
    reward: str = "binary",
    masked: float = 0.0,
    gaps: float = 0.0,
    usage: float = 1.0,
    extras: bool = True,
    judge: bool = False,
    perf: float = 0.0,
    shuffle: bool = False,
    sparse_rollouts: bool = False,
    int_only: bool = False,
    late_float: bool = False,
    late_column: bool = False,
    keyless: bool = False,
    usage_clash: bool = False,
) -> list[Row]:
    """Verify responses of `tasks` tasks, each with a seeded number of rollouts in `rollouts`."""
    rnd = random.Random(seed)
    rows: list[Row] = []
    for task in rnd.sample(range(1, tasks * 3 + 1), tasks):
        count = rnd.randint(*rollouts)
        indexes = sorted(rnd.sample(range(count + 3), count)) if sparse_rollouts else list(range(count))
        for rollout in indexes:
            row: Row = {"_ng_task_index": task, "_ng_rollout_index": rollout}
            if int_only:
                row.update(reward=int(rnd.random() < 0.5), steps=rnd.randint(0, 9), done=rnd.random() < 0.5)
            else:
                row["reward"] = _reward(rnd, reward)
            if masked and rnd.random() < masked:
                row["mask_sample"] = True
            elif rnd.random() < 0.5:
                row["mask_sample"] = False
            if not int_only and rnd.random() < usage:
                row["response"] = {"usage": _usage(rnd)}
                if usage_clash:  # usage names a top-level field, a private name, mask_sample and a bool
                    row["total_tokens"] = rnd.choice([7, "seven", None])
                    row["response"]["usage"].update(_hidden=3, mask_sample=1, cached=rnd.random() < 0.5)
            row["extracted_answer"] = rnd.choice(["A", "B", "C", None]) if not int_only else "A"
            if extras and not int_only:
                if rnd.random() >= gaps:
                    row["score"] = rnd.uniform(0, 100)
                if rnd.random() >= gaps:
                    row["solved"] = rnd.random() < 0.5
                row["label"] = rnd.choice(["x", "y"])
                row["_private"] = 5.0
                row["failure_kind"] = None
            if judge:
                row["judge_evaluations"] = _judge_evaluations(rnd)
            if perf and rnd.random() < perf:
                row["ng_perf"] = {
                    "prompt_tokens": rnd.randint(10, 90),
                    "completion_tokens": rnd.randint(1, 50),
                    "num_turns": rnd.randint(0, 3),
                    "total_latency_ms": rnd.uniform(10, 500),
                    "token_observability_coverage": rnd.choice([0.0, 1.0]),
                }
            rows.append(row)
    rows.sort(key=lambda row: (row["_ng_task_index"], row["_ng_rollout_index"]))
    if late_float:  # a table that is all-int until its last row
        rows[-1]["reward"] = 0.5
    if late_column:  # a field only the last row has: a gap in every other row
        rows[-1]["late"] = 3
    if keyless:  # rows without a key count as task 0, rollout 0
        rows[:0] = [{"reward": 1.0, "score": 2.5}, {"_ng_rollout_index": 1, "reward": 0.0}]
    if shuffle:
        rnd.shuffle(rows)
    return rows


# --- Hooks ------------------------------------------------------------------------------------------------


def _per_task_hook(tasks: list[list[Row]]) -> dict[str, Any]:
    per_task = [{"_ng_task_index": task[0]["_ng_task_index"], "size": len(task), "odd": math.inf} for task in tasks]
    return {"custom/tasks": len(tasks), "custom/nan": math.nan, "per_task_metrics": per_task}


def _repeat_hook(tasks: list[list[Row]]) -> dict[str, Any]:
    rewards = [float(row["reward"]) for task in tasks for row in task]
    return {"mean/reward": sum(rewards) / len(rewards), "hits": float(sum(rewards))}


MCQA: Hooks = {"compute_metrics": mcqa.compute_metrics, "get_key_metrics": mcqa.get_key_metrics}
JUDGE: Hooks = {"compute_metrics": judge_metrics.compute_metrics, "get_key_metrics": judge_metrics.get_key_metrics}
PER_TASK: Hooks = {"compute_metrics": _per_task_hook}
REPEAT: Hooks = {"compute_metrics": mcqa.compute_metrics, "compute_repeat_metrics": _repeat_hook}

_PARAM_CASES: dict[str, tuple[dict[str, Any], Hooks]] = {
    "mcqa_plain": ({"seed": 1}, MCQA),
    "mcqa_no_usage": ({"seed": 2, "usage": 0.0, "extras": False}, MCQA),
    "mcqa_masked": ({"seed": 3, "masked": 0.3}, MCQA),
    "mcqa_all_masked": ({"seed": 4, "masked": 1.0, "tasks": 3}, MCQA),
    "mcqa_gaps": ({"seed": 5, "gaps": 0.4, "usage": 0.6}, MCQA),
    "mcqa_fraction_rewards": ({"seed": 6, "reward": "fraction"}, MCQA),
    "mcqa_int_rewards": ({"seed": 7, "reward": "int"}, MCQA),
    "mcqa_bool_rewards": ({"seed": 8, "reward": "bool"}, MCQA),
    "mcqa_wide_rewards": ({"seed": 9, "reward": "wide", "tasks": 10}, MCQA),
    "mcqa_single_rollout": ({"seed": 10, "rollouts": (1, 1), "tasks": 9}, MCQA),
    "mcqa_uneven": ({"seed": 11, "rollouts": (1, 6), "tasks": 12}, MCQA),
    "mcqa_uneven_growing": ({"seed": 12, "rollouts": (1, 9), "tasks": 14, "masked": 0.15}, MCQA),
    "mcqa_sparse_rollouts": ({"seed": 13, "rollouts": (1, 4), "sparse_rollouts": True}, MCQA),
    "mcqa_shuffled": ({"seed": 14, "shuffle": True, "rollouts": (2, 5)}, MCQA),
    "mcqa_shuffled_masked_gaps": ({"seed": 15, "shuffle": True, "masked": 0.2, "gaps": 0.3}, MCQA),
    "mcqa_big": ({"seed": 16, "tasks": 400, "rollouts": (4, 4), "gaps": 0.05, "masked": 0.02}, MCQA),
    "mcqa_one_long_task": ({"seed": 17, "tasks": 1, "rollouts": (150, 150), "reward": "fraction"}, MCQA),
    "mcqa_long_tasks": ({"seed": 18, "tasks": 3, "rollouts": (9, 40), "gaps": 0.2}, MCQA),
    "none_plain": ({"seed": 19}, {}),
    "none_int_only": ({"seed": 20, "int_only": True}, {}),
    "none_int_only_single": ({"seed": 21, "int_only": True, "rollouts": (1, 1), "tasks": 4}, {}),
    "none_special_values": ({"seed": 22, "reward": "special", "gaps": 0.3}, {}),
    "none_perf": ({"seed": 23, "perf": 0.7, "shuffle": True}, {}),
    "none_big_gaps": ({"seed": 24, "tasks": 300, "rollouts": (1, 7), "gaps": 0.3, "usage": 0.5}, {}),
    "none_masked_uneven": ({"seed": 25, "masked": 0.4, "rollouts": (1, 5), "tasks": 10}, {}),
    "judge_plain": ({"seed": 26, "judge": True}, JUDGE),
    "judge_masked_shuffled": ({"seed": 27, "judge": True, "masked": 0.3, "shuffle": True}, JUDGE),
    "judge_unjudged": ({"seed": 28, "judge": False}, JUDGE),
    "per_task_metrics": ({"seed": 29, "masked": 0.2}, PER_TASK),
    "per_task_metrics_int_only": ({"seed": 30, "int_only": True}, PER_TASK),
    "per_task_metrics_late_float": ({"seed": 33, "int_only": True, "late_float": True}, PER_TASK),
    "none_int_only_late_float": ({"seed": 34, "int_only": True, "late_float": True, "rollouts": (1, 3)}, {}),
    "none_int_only_late_column": ({"seed": 35, "int_only": True, "late_column": True}, {}),
    "mcqa_int_only_late_float_shuffled": ({"seed": 36, "int_only": True, "late_float": True, "shuffle": True}, MCQA),
    "none_keyless": ({"seed": 37, "keyless": True, "rollouts": (1, 2)}, {}),
    "mcqa_keyless_shuffled": ({"seed": 38, "keyless": True, "shuffle": True}, MCQA),
    "none_usage_clash": ({"seed": 39, "usage_clash": True, "usage": 0.7, "masked": 0.2}, {}),
    "repeat_hook": ({"seed": 31, "rollouts": (2, 3), "tasks": 8}, REPEAT),
    "repeat_hook_uneven_masked": ({"seed": 32, "rollouts": (1, 4), "masked": 0.2, "tasks": 9}, REPEAT),
}


# --- pass@k with custom scores ------------------------------------------------------------------------------


def _score_fn(rollout: Mapping[str, Any]) -> dict[str, Any]:
    """Several score kinds, one of them missing on some rollouts."""
    scores: dict[str, Any] = {"accuracy": rollout["reward"], "solved": bool(rollout["reward"])}
    if "score" in rollout:
        scores["partial"] = rollout["score"] / 100
    if rollout["_ng_rollout_index"] % 3 == 1:
        scores["points"] = rollout["_ng_rollout_index"] + 1
    return scores


def late_growth_rows(seed: int) -> list[Row]:
    """Thousands of one-rollout tasks, then longer ones: k grows, and a score appears, after many tasks."""
    rows = build_rows(seed, tasks=1500, rollouts=(1, 1), usage=0.0, extras=False)
    rows += build_rows(seed + 1, tasks=1500, rollouts=(1, 1), usage=0.0, extras=False)
    rows += build_rows(seed + 2, tasks=1500, rollouts=(1, 1), usage=0.0, extras=False)
    longer = build_rows(seed + 3, tasks=20, rollouts=(2, 6))
    # Distinct keys: the three runs of one-rollout tasks share task indexes, so give each its own range.
    for run, row in enumerate(rows):
        row["_ng_task_index"] += 10_000 * (run // 1500)
    for row in longer:
        row["_ng_task_index"] += 100_000
    return sorted(rows, key=lambda row: row["_ng_task_index"]) + longer


def _tasks(rows: list[Row]) -> list[list[Row]]:
    by_task: dict[Any, list[Row]] = {}
    for row in rows:
        by_task.setdefault(row["_ng_task_index"], []).append(row)
    return [by_task[task] for task in sorted(by_task)]


def _subsets(rows: list[Row]) -> list[Row]:
    return [{**row, "difficulty": ["", "easy", "hard"][row["_ng_task_index"] % 3]} for row in rows]


CASES: dict[str, tuple[Callable[[], list[Row]], Hooks]] = {
    **{name: (partial(build_rows, **params), hooks) for name, (params, hooks) in _PARAM_CASES.items()},
    "mcqa_late_growth": (partial(late_growth_rows, 46), MCQA),
}

PASS_CASES: dict[str, Callable[[], dict[str, Any]]] = {
    "pass_custom_scores": lambda: compute_pass_majority_metrics(
        _tasks(build_rows(40, rollouts=(1, 6), gaps=0.3, reward="fraction")), _score_fn, "extracted_answer"
    ),
    "pass_custom_scores_avg_std": lambda: compute_pass_majority_metrics(
        _tasks(build_rows(41, rollouts=(1, 6), tasks=10, reward="wide")),
        _score_fn,
        "extracted_answer",
        avg_sample_std_dev=True,
    ),
    "pass_no_answer_key_avg_std": lambda: compute_pass_majority_metrics(
        _tasks(build_rows(42, rollouts=(2, 5), reward="int")), avg_sample_std_dev=True
    ),
    "pass_late_name_and_k": lambda: compute_pass_majority_metrics(
        _tasks(late_growth_rows(47)), _score_fn, "extracted_answer", avg_sample_std_dev=True
    ),
    "pass_subsets": lambda: compute_subset_metrics(
        _tasks(_subsets(build_rows(43, rollouts=(1, 5), tasks=9))), "difficulty", answer_key="extracted_answer"
    ),
}


def compute_case(name: str) -> Any:
    if name in PASS_CASES:
        return PASS_CASES[name]()
    rows, hooks = CASES[name]
    return aggregate_metrics(rows(), **hooks)


def _excerpt(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _excerpt(item) for key, item in list(value.items())[:EXCERPT_ENTRIES]}
    if isinstance(value, list):
        return [_excerpt(item) for item in value[:EXCERPT_ITEMS]]
    return value


def record(answer: Any) -> dict[str, Any]:
    """What the golden file keeps of an answer: its hash and a readable excerpt."""
    return {"sha256": hashlib.sha256(orjson.dumps(answer)).hexdigest(), "excerpt": _excerpt(answer)}


def _golden() -> dict[str, Any]:
    return orjson.loads(GOLDEN.read_bytes())


@pytest.mark.parametrize("name", [*CASES, *PASS_CASES])
def test_answer_is_bit_equal_to_the_recorded_one(name: str) -> None:
    expected = _golden()[name]
    actual = record(compute_case(name))
    if actual["sha256"] != expected["sha256"]:
        assert orjson.dumps(actual["excerpt"]) == orjson.dumps(expected["excerpt"])
        pytest.fail(f"{name}: the excerpt matches but the full answer differs")


def main() -> None:
    names = [*CASES, *PASS_CASES]
    # One case a line: diffs stay readable and the file small.
    lines = [orjson.dumps(name) + b": " + orjson.dumps(record(compute_case(name))) for name in names]
    GOLDEN.parent.mkdir(parents=True, exist_ok=True)
    GOLDEN.write_bytes(b"{\n" + b",\n".join(lines) + b"\n}\n")
    print(f"{GOLDEN}: {len(names)} answers, {GOLDEN.stat().st_size} bytes", file=sys.stderr)


if __name__ == "__main__":
    main()
