"""The aggregate-metrics maths against what NeMo Gym 0.7.0 pins.

Tables: the cases of its ``test_aggregate_metrics.py`` (contract section 9, "Metric maths"), the mcqa worked
2x2 example (contract 4.4), the reward-profile rules read from its ``reward_profile.py``, and the
float-summation helpers that make our numbers bit-identical to its numbers.
"""

from __future__ import annotations

import json
import math
import random
from functools import reduce
from operator import add
from typing import Any

import pytest

from reverify_assets.metrics import (
    aggregate_metrics,
    baseline_metrics,
    compute_pass_majority_metrics,
    compute_subset_metrics,
    empty_answer,
    highest_k_metrics,
    mcqa,
)
from reverify_assets.metrics import column_stats as cs
from reverify_assets.metrics.names import is_primary_metric
from reverify_assets.metrics.summation import numpy_sum, python_sum

ANSWER_KEYS = ["group_level_metrics", "agent_metrics", "key_metrics", "perf_summary", "repeat_level_metrics"]


def _row(task: int, rollout: int, reward: float, **fields: Any) -> dict[str, Any]:
    return {"reward": reward, "_ng_task_index": task, "_ng_rollout_index": rollout, **fields}


def _tasks(scores: list[list[Any]], answers: list[list[Any]] | None = None) -> list[list[dict[str, Any]]]:
    """Rollout dicts by task from rewards (and extracted answers)."""
    tasks = []
    for task, rewards in enumerate(scores):
        rollouts = []
        for rollout, reward in enumerate(rewards):
            row = _row(task, rollout, reward)
            if answers is not None:
                row["extracted_answer"] = answers[task][rollout]
            rollouts.append(row)
        tasks.append(rollouts)
    return tasks


def _rows(tasks: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    return [row for rollouts in tasks for row in rollouts]


def _walk_keys(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [key for item_key, item in value.items() for key in [item_key, *_walk_keys(item)]]
    if isinstance(value, list):
        return [key for item in value for key in _walk_keys(item)]
    return []


# --- Route tests (NeMo Gym's TestAggregateMetrics) --------------------------------------------------------

THREE_BY_FOUR = [_row(task, rollout, float((task + rollout) % 2)) for task in range(3) for rollout in range(4)]


def test_empty_input_is_nemo_gyms_empty_answer() -> None:
    answer = aggregate_metrics([])
    assert answer == empty_answer()
    assert list(answer) == ANSWER_KEYS
    assert answer["group_level_metrics"] == [] and answer["repeat_level_metrics"] == []
    assert answer["agent_metrics"] == {} and answer["key_metrics"] == {}
    assert answer["perf_summary"] is None


def test_answer_keys_in_nemo_gym_order() -> None:
    assert list(aggregate_metrics(THREE_BY_FOUR)) == ANSWER_KEYS


def test_group_level_has_one_entry_per_task_and_mean_reward_is_present() -> None:
    answer = aggregate_metrics(THREE_BY_FOUR)
    assert len(answer["group_level_metrics"]) == 3
    assert "mean/reward" in answer["agent_metrics"]


def test_all_rewards_one_give_mean_one() -> None:
    rows = [_row(task, 0, 1.0) for task in range(5)]
    assert aggregate_metrics(rows)["agent_metrics"]["mean/reward"] == 1.0


def test_default_key_metrics_are_every_mean_entry() -> None:
    rows = [_row(0, 0, 1.0, response={"usage": {"input_tokens": 3}}), _row(1, 0, 0.0)]
    answer = aggregate_metrics(rows)
    agent = answer["agent_metrics"]
    assert answer["key_metrics"] == {key: value for key, value in agent.items() if key.startswith("mean/")}
    assert list(answer["key_metrics"]) == ["mean/reward", "mean/input_tokens"]


def test_no_histogram_keys_anywhere() -> None:
    answer = aggregate_metrics(THREE_BY_FOUR, compute_metrics=mcqa.compute_metrics)
    assert not [key for key in _walk_keys(answer) if key.startswith("histogram")]


def test_compute_metrics_hook_gets_rollouts_grouped_by_task_with_custom_fields() -> None:
    seen: list[list[dict[str, Any]]] = []

    def hook(tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        seen.extend(tasks)
        return {"custom/total": sum(row["custom"] for task in tasks for row in task)}

    rows = [{**row, "custom": 2} for row in THREE_BY_FOUR]
    answer = aggregate_metrics(rows, compute_metrics=hook)
    assert [len(task) for task in seen] == [4, 4, 4]
    assert all(row["_ng_task_index"] == index for index, task in enumerate(seen) for row in task)
    assert answer["agent_metrics"]["custom/total"] == 24


@pytest.mark.parametrize(
    ("task_indexes", "expected"),
    [([10, 5, 10, 5], [5, 10]), ([300, 100, 200], [100, 200, 300])],
)
def test_group_level_is_in_sorted_task_order(task_indexes: list[int], expected: list[int]) -> None:
    rows = [_row(task, position, 1.0) for position, task in enumerate(task_indexes)]
    groups = aggregate_metrics(rows)["group_level_metrics"]
    assert [group["_ng_task_index"] for group in groups] == expected


def test_per_task_metrics_go_to_group_entries_not_agent_metrics() -> None:
    def hook(tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        per_task = [{"_ng_task_index": task[0]["_ng_task_index"], "difficulty": len(task)} for task in tasks]
        return {"custom": 1.0, "per_task_metrics": per_task}

    answer = aggregate_metrics(THREE_BY_FOUR, compute_metrics=hook)
    assert [group["difficulty"] for group in answer["group_level_metrics"]] == [4, 4, 4]
    assert "per_task_metrics" not in answer["agent_metrics"]
    assert answer["agent_metrics"]["custom"] == 1.0


def test_numeric_usage_field_sanity() -> None:
    """Collection's ``run_from_config_sanity``: T in {0,1,2}, R in {0,1}, a usage field always 1."""
    rows = [_row(task, rollout, 1.0, response={"usage": {"n": 1}}) for task in range(3) for rollout in range(2)]
    answer = aggregate_metrics(rows)
    agent = answer["agent_metrics"]
    stats = [agent[f"{stat}/n"] for stat in ("mean", "max", "min", "median", "std")]
    assert stats == [1.0, 1, 1, 1.0, 0.0]
    assert answer["key_metrics"] == {"mean/reward": 1.0, "mean/n": 1.0}


@pytest.mark.parametrize(("reward", "mean"), [(1.0, 1.0), (0.0, 0.0)])
def test_one_call_per_agent(reward: float, mean: float) -> None:
    """Collection's ``call_aggregate_metrics_multiple_agents``: each agent's rows are their own call."""
    rows = [_row(task, 0, reward) for task in range(2)]
    assert aggregate_metrics(rows)["agent_metrics"]["mean/reward"] == mean


def test_baseline_metrics_is_aggregate_without_hooks() -> None:
    assert baseline_metrics(THREE_BY_FOUR) == aggregate_metrics(THREE_BY_FOUR)


# --- pass@k / majority@k (NeMo Gym's TestComputePassMajorityMetrics) --------------------------------------


def _metrics(scores: list[list[Any]], answers: list[list[Any]] | None = None) -> dict[str, Any]:
    key = "extracted_answer" if answers is not None else None
    return compute_pass_majority_metrics(_tasks(scores, answers), answer_key=key)


PASS_MAJORITY_CASES = [
    # (scores by task, answers by task or None, metric, expected value rounded to 2 places)
    ([[1, 1, 1, 1], [0, 0, 0, 0], [1, 0, 1, 0]], None, "pass@1/accuracy", 50.0),
    ([[1, 1, 1, 1], [0, 0, 0, 0], [1, 0, 1, 0]], None, "pass@4/accuracy", 66.67),
    ([[1, 0], [0, 1], [1, 1]], None, "pass@1[avg-of-2]/accuracy", 66.67),
    ([[1, 1, 0], [0, 0, 1]], [["A", "A", "B"], ["C", "C", "D"]], "majority@3/accuracy", 50.0),
    ([[1, 1], [1, 1]], [["A", "A"], [None, None]], "majority@2/accuracy", 50.0),
    ([[1, 1], [1, 1]], [[None, None], [None, None]], "majority@2/accuracy", 0.0),
    ([[1, 1], [1, 0]], [["A", "A"], [None, None]], "pass@1/no_answer", 50.0),
    # Non-binary scores: pass@k is the max of the first k.
    ([[0.5, 0.25], [0.0, 0.75]], None, "pass@1/accuracy", 25.0),
    ([[0.5, 0.25], [0.0, 0.75]], None, "pass@2/accuracy", 62.5),
    # A task with fewer than k scored rollouts is left out of pass@k.
    ([[1, 0, 0], [1]], None, "pass@3/accuracy", 100.0),
]


@pytest.mark.parametrize(("scores", "answers", "metric", "expected"), PASS_MAJORITY_CASES)
def test_pass_majority_values(
    scores: list[list[Any]], answers: list[list[Any]] | None, metric: str, expected: float
) -> None:
    assert round(_metrics(scores, answers)[metric], 2) == expected


WORKED_2X2 = {
    "pass@1/accuracy": 75.0,
    "pass@2/accuracy": 100.0,
    "pass@1[avg-of-1]/accuracy": 50.0,
    "pass@1[avg-of-2]/accuracy": 75.0,
    "majority@1/accuracy": 50.0,
    "majority@2/accuracy": 75.0,
    "pass@1/no_answer": 0.0,
    "pass@2/no_answer": 0.0,
    "pass@1[avg-of-1]/no_answer": 0.0,
    "pass@1[avg-of-2]/no_answer": 0.0,
    "majority@1/no_answer": 0.0,
    "majority@2/no_answer": 0.0,
    "pass@1[avg-of-2]/accuracy/std_dev_across_runs": 35.355,
    "pass@1[avg-of-2]/accuracy/std_err_across_runs": 25.0,
    "mean/reward": 0.75,
}


@pytest.mark.parametrize(("metric", "expected"), WORKED_2X2.items())
def test_mcqa_worked_2x2_example(metric: str, expected: float) -> None:
    """Contract 4.4: ``[(1,A),(1,A)], [(0,B),(1,C)]`` through mcqa's hooks."""
    rows = _rows(_tasks([[1.0, 1.0], [0.0, 1.0]], [["A", "A"], ["B", "C"]]))
    agent = aggregate_metrics(rows, compute_metrics=mcqa.compute_metrics)["agent_metrics"]
    assert round(agent[metric], 3) == expected


def test_mcqa_worked_2x2_key_metrics() -> None:
    rows = _rows(_tasks([[1.0, 1.0], [0.0, 1.0]], [["A", "A"], ["B", "C"]]))
    answer = aggregate_metrics(rows, compute_metrics=mcqa.compute_metrics, get_key_metrics=mcqa.get_key_metrics)
    assert answer["key_metrics"] == {
        "mean/reward": 0.75,
        "pass@1[avg-of-2]/accuracy": 75.0,
        "pass@1[avg-of-2]/no_answer": 0.0,
        "pass@2/no_answer": 0.0,
        "majority@2/accuracy": 75.0,
        "pass@1/accuracy": 75.0,
    }
    assert answer["agent_metrics"]["num_repeats"] == 2
    assert answer["agent_metrics"]["per_sample_aggregate"] == {
        "accuracy": [50.0, 100.0],
        "no_answer": [0.0, 0.0],
    }


def test_std_dev_and_err_across_runs_are_positive() -> None:
    metrics = _metrics([[1, 0], [1, 1], [0, 0]], [["A", "B"], ["A", "A"], ["B", "C"]])
    assert metrics["pass@1[avg-of-2]/accuracy/std_dev_across_runs"] > 0
    assert metrics["pass@1[avg-of-2]/accuracy/std_err_across_runs"] > 0


def test_no_tasks_give_no_metrics() -> None:
    assert compute_pass_majority_metrics([]) == {}


def test_without_answer_key_there_is_no_majority_or_no_answer() -> None:
    metrics = _metrics([[1, 0], [0, 1]])
    assert not [key for key in metrics if key.startswith("majority@") or "no_answer" in key]
    assert "pass@1/accuracy" in metrics


def test_multiple_score_methods_give_separate_families() -> None:
    tasks = _tasks([[1.0, 0.0], [1.0, 1.0]])
    for task in tasks:
        for row in task:
            row["symbolic"] = row["reward"] == 1.0

    def score_fn(row: dict[str, Any]) -> dict[str, Any]:
        return {"accuracy": row["reward"], "symbolic_accuracy": row["symbolic"]}

    metrics = compute_pass_majority_metrics(tasks, score_fn=score_fn)
    for family in ("pass@1/", "pass@2/", "pass@1[avg-of-2]/"):
        assert f"{family}accuracy" in metrics and f"{family}symbolic_accuracy" in metrics
    assert list(metrics["per_sample_aggregate"]) == ["accuracy", "symbolic_accuracy"]


def test_metric_order_is_k_then_score_then_family() -> None:
    metrics = _metrics([[1, 0]], [["A", None]])
    assert list(metrics)[:6] == [
        "pass@1/accuracy",
        "pass@1[avg-of-1]/accuracy",
        "majority@1/accuracy",
        "pass@1/no_answer",
        "pass@1[avg-of-1]/no_answer",
        "majority@1/no_answer",
    ]


# --- highest_k_metrics, subsets, avg_sample_std_dev -------------------------------------------------------

AGENT = {
    "pass@1/accuracy": 50.0,
    "pass@4/accuracy": 80.0,
    "pass@4/no_answer": 10.0,
    "pass@1[avg-of-4]/accuracy": 60.0,
    "pass@1[avg-of-4]/accuracy/std_dev_across_runs": 3.0,
    "pass@1[avg-of-4]/accuracy/std_err_across_runs": 1.5,
    "pass@1[avg-of-4]/accuracy/avg_sample_std_dev": 0.4,
    "pass@1[avg-of-2]/accuracy": 55.0,
}

HIGHEST_K_CASES = [
    ("pass@{k}", None, None, {"pass@4/accuracy": 80.0, "pass@4/no_answer": 10.0}),
    ("pass@{k}", None, ["no_answer"], {"pass@4/accuracy": 80.0}),
    ("pass@{k}", ["no_answer"], None, {"pass@4/no_answer": 10.0}),
    ("pass@1[avg-of-{k}]", None, None, {"pass@1[avg-of-4]/accuracy": 60.0}),
    ("majority@{k}", None, None, {}),
]


@pytest.mark.parametrize(("pattern", "score_names", "exclude", "expected"), HIGHEST_K_CASES)
def test_highest_k_metrics(
    pattern: str, score_names: list[str] | None, exclude: list[str] | None, expected: dict[str, float]
) -> None:
    assert highest_k_metrics(AGENT, pattern, score_names=score_names, exclude_names=exclude) == expected


def test_subset_metrics_are_prefixed_and_have_no_per_sample_aggregate() -> None:
    tasks = _tasks([[1, 0], [1, 1], [0, 0]])
    for task, difficulty in zip(tasks, ["easy", "hard", "easy"], strict=True):
        for row in task:
            row["difficulty"] = difficulty
    metrics = compute_subset_metrics(tasks, "difficulty")
    assert metrics["easy/pass@1/accuracy"] == 25.0
    assert metrics["hard/pass@1/accuracy"] == 100.0
    assert not [key for key in metrics if "per_sample_aggregate" in key]


@pytest.mark.parametrize(("scores", "present"), [([[1, 0], [1, 1]], True), ([[1], [0]], False)])
def test_avg_sample_std_dev_only_when_k_above_one(scores: list[list[int]], present: bool) -> None:
    metrics = compute_pass_majority_metrics(_tasks(scores), avg_sample_std_dev=True)
    key = "pass@1[avg-of-2]/accuracy/avg_sample_std_dev"
    assert (key in metrics) is present
    if present:
        assert metrics[key] == pytest.approx(math.sqrt(0.5) / 2)


# --- Reward profile rules (NeMo Gym 0.7.0 reward_profile.py) ----------------------------------------------


def test_masked_rows_leave_the_quality_stats_and_are_counted() -> None:
    rows = [_row(0, 0, 1.0), _row(0, 1, 0.0, mask_sample=True), _row(1, 0, 0.0, mask_sample=True)]
    answer = aggregate_metrics(rows)
    agent = answer["agent_metrics"]
    assert agent["mean/reward"] == 1.0
    assert "mean/mask_sample" not in agent
    coverage = {
        "coverage/measured_rollouts": 1,
        "coverage/masked_rollouts": 2,
        "coverage/measured_tasks": 1,
        "coverage/fully_masked_tasks": 1,
    }
    assert {key: agent[key] for key in coverage} == coverage
    assert answer["key_metrics"] == {"mean/reward": 1.0, **coverage}
    assert [group["_ng_task_index"] for group in answer["group_level_metrics"]] == [0]
    assert agent["num_repeats"] == 2  # counted over every row, masked ones too


def test_unmasked_mask_sample_false_is_not_a_metric() -> None:
    answer = aggregate_metrics([_row(0, 0, 1.0, mask_sample=False)])
    assert not [key for key in answer["agent_metrics"] if "mask_sample" in key or "coverage" in key]


def test_all_masked_reports_only_coverage() -> None:
    rows = [_row(0, 0, 1.0, mask_sample=True), _row(1, 0, 1.0, mask_sample=True)]
    answer = aggregate_metrics(rows, compute_metrics=mcqa.compute_metrics, get_key_metrics=mcqa.get_key_metrics)
    coverage = {
        "coverage/measured_rollouts": 0,
        "coverage/masked_rollouts": 2,
        "coverage/measured_tasks": 0,
        "coverage/fully_masked_tasks": 2,
    }
    assert answer == {**empty_answer(), "agent_metrics": coverage, "key_metrics": coverage}


def test_numbers_are_top_level_fields_and_usage_never_underscore_or_text() -> None:
    usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "total_tokens": 12}
    row = _row(0, 0, 1.0, extra=True, label="x", _private=5.0, response={"usage": usage, "output": []})
    groups = aggregate_metrics([row])["group_level_metrics"]
    fields = {key.split("/", 1)[1] for key in groups[0] if key.startswith("mean/")}
    assert fields == {"reward", "extra", "input_tokens", "total_tokens"}


def test_group_entry_shape() -> None:
    usage = {"input_tokens": 7, "output_tokens": 3}
    rows = [
        _row(4, 1, 0.0, response={"usage": usage}),
        _row(4, 0, 1.0, response={"usage": usage}, extra=False),
    ]
    (group,) = aggregate_metrics(rows)["group_level_metrics"]
    assert next(iter(group)) == "_ng_task_index"
    assert list(group)[-6:] == [
        "sample",
        "num_rollouts",
        "expected_num_rollouts",
        "missing_num_rollouts",
        "reward_profile_completion_pct",
        "rollout_infos",
    ]
    assert group["sample"] == {"agent_ref": {"name": "agent"}}
    assert (group["num_rollouts"], group["expected_num_rollouts"], group["missing_num_rollouts"]) == (2, 2, 0)
    assert group["reward_profile_completion_pct"] == 100.0
    assert group["rollout_infos"] == [
        {
            "rollout_id": "4:0",
            "_ng_task_index": 4,
            "_ng_rollout_index": 0,
            "reward": 1.0,
            "input_tokens": 7,
            "output_tokens": 3,
            "extra": 0,
        },
        {"rollout_id": "4:1", "_ng_task_index": 4, "_ng_rollout_index": 1, "reward": 0.0, **usage},
    ]
    # The stats are stat-major, columns in first-appearance order (rows sorted by key first).
    assert [key for key in group if key.startswith("mean/")] == [
        "mean/reward",
        "mean/extra",
        "mean/input_tokens",
        "mean/output_tokens",
    ]


def test_std_of_one_value_is_zero_and_never_nan() -> None:
    rows = [_row(0, 0, 1.0), _row(1, 0, 0.0, extra=1)]
    groups = aggregate_metrics(rows)["group_level_metrics"]
    assert groups[0]["std/reward"] == 0.0 and "std/extra" not in groups[0]
    assert groups[1]["std/reward"] == 0.0 and groups[1]["std/extra"] == 0.0
    assert "mean/extra" not in groups[0]


def test_std_is_sample_std_and_median_averages_the_middle_pair() -> None:
    agent = aggregate_metrics([_row(task, 0, reward) for task, reward in enumerate([0.0, 1.0, 1.0, 1.0])])
    assert agent["agent_metrics"]["std/reward"] == pytest.approx(0.5)
    assert agent["agent_metrics"]["median/reward"] == 1.0
    pair = aggregate_metrics([_row(0, 0, 0.0), _row(1, 0, 1.0)])["agent_metrics"]
    assert pair["median/reward"] == 0.5


@pytest.mark.parametrize(("rewards", "kind"), [([1, 0], int), ([1.0, 0.0], float), ([1, 0.5], float)])
def test_max_and_min_stay_int_only_for_an_all_int_table(rewards: list[float], kind: type) -> None:
    agent = aggregate_metrics([_row(task, 0, reward) for task, reward in enumerate(rewards)])["agent_metrics"]
    assert type(agent["max/reward"]) is kind and type(agent["min/reward"]) is kind
    assert type(agent["mean/reward"]) is float


def test_no_repeat_level_metrics_for_a_single_rollout_index() -> None:
    answer = aggregate_metrics([_row(task, 0, 1.0) for task in range(3)])
    assert answer["repeat_level_metrics"] == []
    assert not [key for key in answer["agent_metrics"] if "_across_repeats/" in key]


def test_repeat_level_entries() -> None:
    rewards = {(0, 0): 1.0, (1, 0): 0.0, (2, 0): 1.0, (0, 1): 1.0, (1, 1): 1.0}
    rows = [_row(task, rollout, reward) for (task, rollout), reward in rewards.items()]
    first, second = aggregate_metrics(rows)["repeat_level_metrics"]
    assert list(first)[:3] == ["_ng_rollout_index", "sample_count", "missing_count"]
    assert (first["_ng_rollout_index"], first["sample_count"], first["missing_count"]) == (0, 3, 0)
    assert (second["_ng_rollout_index"], second["sample_count"], second["missing_count"]) == (1, 2, 1)
    assert list(first)[3:] == [
        f"{stat}/reward"
        for stat in ("mean", "median", "std", "sem", "min", "max", "p25", "p75", "ci_low_95", "ci_high_95")
    ]
    assert first["mean/reward"] == pytest.approx(2 / 3)
    assert first["sem/reward"] == pytest.approx(first["std/reward"] / math.sqrt(3))
    assert (first["p25/reward"], first["p75/reward"]) == (0.5, 1.0)
    # A repeat whose values are identical has sem 0: the interval is the point (mean, mean).
    assert (second["sem/reward"], second["ci_low_95/reward"], second["ci_high_95/reward"]) == (0.0, 1.0, 1.0)


def test_across_repeats_family_summarises_the_repeat_means() -> None:
    rows = [_row(task, rollout, float(task <= rollout)) for task in range(3) for rollout in range(3)]
    agent = aggregate_metrics(rows)["agent_metrics"]
    means = [1 / 3, 2 / 3, 1.0]
    assert [key for key in agent if "_across_repeats/" in key] == [
        f"{stat}_across_repeats/mean/reward"
        for stat in ("mean", "median", "std", "min", "max", "se", "ci_low_95", "ci_high_95")
    ]
    assert agent["mean_across_repeats/mean/reward"] == pytest.approx(sum(means) / 3)
    assert agent["median_across_repeats/mean/reward"] == pytest.approx(2 / 3)
    assert agent["std_across_repeats/mean/reward"] == pytest.approx(1 / 3)
    assert agent["se_across_repeats/mean/reward"] == pytest.approx(1 / 3 / math.sqrt(3))
    half_width = 4.302652729749464 * (1 / 3 / math.sqrt(3))  # t(0.975, df=2)
    assert agent["ci_low_95_across_repeats/mean/reward"] == pytest.approx(2 / 3 - half_width)
    assert agent["ci_high_95_across_repeats/mean/reward"] == pytest.approx(2 / 3 + half_width)


def test_custom_repeat_metrics_replace_and_are_summarised() -> None:
    rows = [_row(task, rollout, float(task <= rollout)) for task in range(2) for rollout in range(2)]

    def per_repeat(tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        return {"mean/reward": 0.5, "hits": float(sum(row["reward"] for task in tasks for row in task))}

    answer = aggregate_metrics(rows, compute_repeat_metrics=per_repeat)
    repeats = answer["repeat_level_metrics"]
    assert [entry["mean/reward"] for entry in repeats] == [0.5, 0.5]
    assert [entry["hits"] for entry in repeats] == [1.0, 2.0]
    assert answer["agent_metrics"]["mean_across_repeats/hits"] == 1.5
    assert answer["agent_metrics"]["mean_across_repeats/mean/reward"] == 0.5


def test_duplicate_rollout_keys_are_an_error() -> None:
    with pytest.raises(ValueError, match="Duplicate"):
        aggregate_metrics([_row(0, 0, 1.0), _row(0, 0, 0.0)])


def test_output_is_plain_json() -> None:
    rows = [_row(0, 0, 1.0), _row(0, 1, float("nan")), _row(1, 0, float("inf"))]
    answer = aggregate_metrics(rows, compute_metrics=lambda tasks: {"bad": float("nan")})
    text = json.dumps(answer, allow_nan=False)
    assert json.loads(text)["agent_metrics"]["bad"] is None


def test_perf_summary_from_ng_perf() -> None:
    perf = [
        {"prompt_tokens": 10, "completion_tokens": 4, "num_turns": 2, "total_latency_ms": 100.0},
        {"prompt_tokens": 30, "completion_tokens": 6, "num_turns": 3, "token_observability_coverage": 1.0},
    ]
    rows = [_row(0, 0, 1.0, ng_perf=perf[0]), _row(1, 0, 1.0, ng_perf=perf[1]), _row(2, 0, 1.0)]
    summary = aggregate_metrics(rows)["perf_summary"]
    assert summary["overall_observability_coverage"] == pytest.approx(2 / 3)
    assert summary["token_observability_coverage"] == pytest.approx(1 / 3)
    assert (
        summary["mean_prompt_tokens"],
        summary["median_prompt_tokens"],
        summary["total_prompt_tokens"],
    ) == (
        20.0,
        20.0,
        40,
    )
    assert summary["mean_tokens_per_turn"] == 2.0
    assert summary["total_latency_p50_ms"] == 100.0


@pytest.mark.parametrize(
    ("name", "primary"),
    [
        ("mean/reward", True),
        ("pass@1/accuracy", True),
        ("std/reward", False),
        ("median/reward", False),
        ("ci_low_95/reward", False),
        ("sample_count", False),
        ("num_repeats", False),
        ("mean/x/ci_high_95", False),
        ("pass@1[avg-of-2]/accuracy/std_err_across_runs", False),
        ("mean_across_repeats/mean/reward", False),
    ],
)
def test_primary_metric_names(name: str, primary: bool) -> None:
    assert is_primary_metric(name) is primary


# --- Bit-level helpers --------------------------------------------------------------------------------------


def _spread_values() -> list[float]:
    rnd = random.Random(7)
    return [rnd.uniform(-1, 1) * 10 ** rnd.randint(-3, 9) for _ in range(300)]


SUM_CASES = [
    # values, CPython >= 3.12 sum(), numpy add.reduce, naive left-to-right
    ([0.1] * 10, 1.0, 1.0, 0.9999999999999999),
    ([1e16, 1.0, -1e16], 1.0, 0.0, 0.0),
    (_spread_values(), -11146857.83784779, -11146857.837847948, -11146857.837847618),
]


@pytest.mark.parametrize(("values", "python", "numpy", "naive"), SUM_CASES)
def test_sums_match_cpython_and_numpy(values: list[float], python: float, numpy: float, naive: float) -> None:
    assert python_sum(values) == python
    assert numpy_sum(values) == numpy
    assert reduce(add, values, 0.0) == naive


def test_python_sum_keeps_ints_exact_and_adds_late_ints_without_compensation() -> None:
    assert python_sum([1, 2, 3]) == 6 and type(python_sum([1, 2, 3])) is int
    assert python_sum([3, 0.1, 2, 0.2]) == 5.3
    assert python_sum([]) == 0


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [([1, 2, 3, 4, 10], 0.25, 2.0), ([3.0, 1.0, 2.0, 10.0], 0.75, 4.75), ([5.0], 0.25, 5.0)],
)
def test_quantile_is_numpy_linear(values: list[float], q: float, expected: float) -> None:
    assert cs.quantile(values, q) == expected


def test_confidence_interval() -> None:
    assert cs.confidence_interval(1.0, 0.5, 1) is None
    assert cs.confidence_interval(1.0, 0.0, 5) == (1.0, 1.0)
    assert cs.confidence_interval(1.0, 0.5, 3) == pytest.approx((-1.151326364874731, 3.151326364874731))
