"""The streaming accumulator against the in-memory answer: same JSON, byte for byte, on every golden case."""

from __future__ import annotations

import io
import tempfile
from typing import Any

import orjson
import pytest
from test_metrics_golden import CASES, Hooks, Row, build_rows

from reverify_assets.metrics import MetricsAccumulator, SpooledGroups, aggregate_metrics, mcqa
from reverify_assets.metrics.group_batch import BATCH


def _key_order(rows: list[Row]) -> list[Row]:
    return sorted(rows, key=lambda row: (row.get("_ng_task_index", 0), row.get("_ng_rollout_index", 0)))


def _streamed(rows: list[Row], hooks: Hooks, **write: Any) -> bytes:
    out = io.BytesIO()
    with MetricsAccumulator(**hooks) as accumulator:
        for row in rows:
            accumulator.add(row)
        accumulator.write_answer(out, **write)
    return out.getvalue()


@pytest.mark.parametrize("name", list(CASES))
def test_streamed_answer_is_the_in_memory_answer(name: str) -> None:
    rows_of, hooks = CASES[name]
    rows = _key_order(rows_of())
    assert _streamed(rows, hooks) == orjson.dumps(aggregate_metrics(rows, **hooks))


@pytest.mark.parametrize("name", ["mcqa_plain", "mcqa_all_masked", "per_task_metrics_late_float"])
def test_written_entry_is_the_cli_entry(name: str) -> None:
    """What ``aggregate_spools`` writes per agent: ``agent_ref`` first, the answer without perf_summary."""
    rows_of, hooks = CASES[name]
    rows = _key_order(rows_of())
    answer = aggregate_metrics(rows, **hooks)
    answer.pop("perf_summary")
    expected = {"agent_ref": {"name": "bench"}, **answer}
    written = _streamed(rows, hooks, prefix_fields={"agent_ref": {"name": "bench"}}, drop=("perf_summary",))
    assert written == orjson.dumps(expected)
    assert list(orjson.loads(written)) == list(expected)


def test_answer_and_written_answer_agree_after_streaming() -> None:
    rows = _key_order(build_rows(3, masked=0.3))
    accumulator = MetricsAccumulator(compute_metrics=mcqa.compute_metrics, get_key_metrics=mcqa.get_key_metrics)
    for row in rows:
        accumulator.add(row)
    out = io.BytesIO()
    accumulator.write_answer(out)
    assert orjson.loads(out.getvalue()) == accumulator.answer() == aggregate_metrics(rows, **CASES["mcqa_masked"][1])


def test_empty_stream_is_the_empty_answer() -> None:
    assert orjson.loads(_streamed([], {})) == aggregate_metrics([])


def test_group_entries_leave_memory_a_batch_of_tasks_at_a_time() -> None:
    rows = [{"_ng_task_index": task, "_ng_rollout_index": 0, "reward": 1.0} for task in range(BATCH + 3)]
    with tempfile.TemporaryFile() as spool:
        accumulator = MetricsAccumulator(groups=SpooledGroups(spool))
        # The first row of task BATCH + 1 completes task BATCH, which finds the batch full.
        for row in rows[: BATCH + 2]:
            accumulator.add(row)
        spool.seek(0)
        entries = [orjson.loads(line) for line in spool]
        assert [entry["_ng_task_index"] for entry in entries] == list(range(BATCH))
        assert entries[0]["rollout_infos"] == [
            {"rollout_id": "0:0", "_ng_task_index": 0, "_ng_rollout_index": 0, "reward": 1.0}
        ]


@pytest.mark.parametrize(
    "keys",
    [[(0, 1), (0, 0)], [(1, 0), (0, 0)], [(0, 0), (1, 0), (0, 1)]],
)
def test_out_of_order_is_an_error(keys: list[tuple[int, int]]) -> None:
    accumulator = MetricsAccumulator()
    with pytest.raises(ValueError, match="out of key order"):
        for task, rollout in keys:
            accumulator.add({"_ng_task_index": task, "_ng_rollout_index": rollout, "reward": 1.0})


@pytest.mark.parametrize(
    ("masks", "duplicate"),
    [((False, False), True), ((False, True), False), ((True, False), False), ((True, True), False)],
)
def test_only_two_scored_rows_with_one_key_are_a_duplicate(masks: tuple[bool, bool], duplicate: bool) -> None:
    rows = [{"_ng_task_index": 0, "_ng_rollout_index": 0, "reward": 1.0, "mask_sample": mask} for mask in masks]
    accumulator = MetricsAccumulator()
    for row in rows:
        accumulator.add(row)
    if duplicate:
        with pytest.raises(ValueError, match="Duplicate"):
            accumulator.answer()
        with pytest.raises(ValueError, match="Duplicate"):
            aggregate_metrics(rows)
    else:
        assert accumulator.answer() == aggregate_metrics(rows)


def test_no_rows_after_the_answer() -> None:
    accumulator = MetricsAccumulator()
    accumulator.add({"reward": 1.0})
    accumulator.answer()
    with pytest.raises(RuntimeError):
        accumulator.add({"_ng_task_index": 1, "reward": 1.0})


def test_a_prefix_field_may_not_shadow_a_section() -> None:
    accumulator = MetricsAccumulator()
    with pytest.raises(ValueError, match="key_metrics"):
        accumulator.write_answer(io.BytesIO(), prefix_fields={"key_metrics": {}})


def test_list_form_hook_sees_the_tasks_in_a_stream() -> None:
    seen: list[list[int]] = []

    def hook(tasks: list[list[Row]]) -> dict[str, Any]:
        seen.extend([row["_ng_rollout_index"] for row in task] for task in tasks)
        return {"tasks": len(tasks)}

    rows = _key_order(build_rows(5, tasks=3, rollouts=(2, 2), masked=0.0))
    assert orjson.loads(_streamed(rows, {"compute_metrics": hook}))["agent_metrics"]["tasks"] == 3
    assert seen == [[0, 1]] * 3
