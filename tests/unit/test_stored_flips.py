"""Flips of re-scored rows against the rewards their rollouts stored: counted in the verify loop, or by one pass
over a resumed output, and equal to what ``reverify compare rollouts.jsonl output.jsonl`` gives either way."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import orjson
import polars as pl
import pytest

from reverify_assets.compare.bootstrap import BootstrapSettings
from reverify_assets.compare.comparison import CompareRequest, run_comparison
from reverify_assets.compare.stored_flips import StoredRewardFlips
from reverify_assets.files.names import RunFiles
from reverify_assets.keys.key_index import KEY_COLUMNS, scan_keys
from reverify_assets.rows.row_fields import numeric_reward
from reverify_assets.run.output_flips import tally_output_flips
from reverify_assets.run.row_source import PairReader
from reverify_assets.run.verify_loop import verify_plan
from reverify_assets.verifier.client import VerifyOutcome
from tests.support.cli import write_jsonl


@pytest.mark.parametrize(
    ("stored", "new", "masked", "cell"),
    [
        (1.0, 1.0, False, "both_pass"),
        (1, 0.0, False, "pass_to_fail"),
        (0.0, 1.0, False, "fail_to_pass"),
        (0.0, 0, False, "both_fail"),
        (0.5, 1.0, False, "non_binary"),
        (1.0, 0.25, False, "non_binary"),
        (None, 1.0, False, "unpaired"),
        (1.0, None, False, "unpaired"),
        (1.0, 0.0, True, "masked"),
    ],
)
def test_each_row_lands_in_one_cell(stored: float | None, new: float | None, masked: bool, cell: str) -> None:
    flips = StoredRewardFlips()
    flips.add(stored, new, masked=masked)
    cells = ("both_pass", "pass_to_fail", "fail_to_pass", "both_fail", "non_binary", "unpaired", "masked")
    assert {name: getattr(flips, name) for name in cells} == {name: int(name == cell) for name in cells}


@pytest.mark.parametrize(("value", "expected"), [(1, 1.0), (0.5, 0.5), (True, None), (None, None), ("1", None)])
def test_only_numbers_are_rewards(value: Any, expected: float | None) -> None:
    assert numeric_reward({"reward": value}) == expected


def test_figures_need_binary_rewards_for_the_flip_rate() -> None:
    flips = StoredRewardFlips()
    for stored, new in [(1, 1), (1, 0), (0, 1), (0, 1), (0, 0)]:
        flips.add(stored, new)
    assert (flips.compared, flips.flips, flips.flip_rate) == (5, 3, 0.6)
    assert flips.mean_stored == 0.4 and flips.mean_new == 0.6 and flips.mean_delta == pytest.approx(0.2)
    flips.add(0.0, 0.5)
    assert flips.flip_rate is None and not flips.is_binary and flips.mean_delta == pytest.approx((3.5 - 2.0) / 6)
    assert StoredRewardFlips().mean_delta is None and StoredRewardFlips().flip_rate is None


class ScriptedVerifier:
    """Answers each row with the reward (and mask) scripted for its key, or a failure."""

    def __init__(self, answers: dict[tuple[int, int], dict[str, Any] | None]) -> None:
        self.answers = answers

    async def verify(self, body: bytes) -> VerifyOutcome:
        payload = orjson.loads(body)
        answer = self.answers[(payload["_ng_task_index"], payload["_ng_rollout_index"])]
        return VerifyOutcome(None, error="down") if answer is None else VerifyOutcome(dict(answer))


def rollout_files(tmp_path: Path, rows: int, seed: int) -> tuple[Path, Path, dict[tuple[int, int], Any]]:
    """Inputs and rollouts of ``rows`` keys (shuffled, as files may be) with stored pass/fail rewards, some masked,
    and the verifier's scripted answers: pass/fail, some masked, some failures."""
    rng = random.Random(seed)
    keys = [(task, rollout) for task in range(rows // 4) for rollout in range(4)]
    rng.shuffle(keys)
    inputs, rollouts, answers = [], [], {}
    for task, rollout in keys:
        key_fields = {"_ng_task_index": task, "_ng_rollout_index": rollout}
        inputs.append({**key_fields, "agent_ref": {"name": "agent"}})
        stored: dict[str, Any] = {**key_fields, "response": {}, "reward": float(rng.random() < 0.5)}
        if rng.random() < 0.05:
            stored["mask_sample"] = True
        rollouts.append(stored)
        answer: dict[str, Any] | None = {"reward": float(rng.random() < 0.6)}
        if rng.random() < 0.05:
            answer = {**answer, "mask_sample": True}
        elif rng.random() < 0.05:
            answer = None
        answers[(task, rollout)] = answer
    return write_jsonl(tmp_path / "inputs.jsonl", inputs), write_jsonl(tmp_path / "rollouts.jsonl", rollouts), answers


def join_plan(inputs: Path, rollouts: Path) -> pl.DataFrame:
    def side(path: Path, name: str) -> pl.DataFrame:
        return scan_keys(path).frame.rename({"offset": f"{name}_offset", "line": f"{name}_line"})

    return (
        side(inputs, "input")
        .join(side(rollouts, "rollout"), on=KEY_COLUMNS)
        .sort(KEY_COLUMNS)
        .with_columns(pl.lit("s").alias("server"))
    )


def table(flips: StoredRewardFlips) -> tuple[int, int, int, int]:
    return flips.both_pass, flips.pass_to_fail, flips.fail_to_pass, flips.both_fail


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_loop_tally_and_output_pass_equal_reverify_compare_of_rollouts_and_output(tmp_path: Path, seed: int) -> None:
    inputs, rollouts, answers = rollout_files(tmp_path, 400, seed)
    plan = join_plan(inputs, rollouts)
    files = RunFiles.for_output(tmp_path / "out.jsonl")
    with PairReader(inputs, rollouts) as pairs:
        stats = asyncio.run(verify_plan(plan, pairs, {"s": ScriptedVerifier(answers)}, files, {"s": {}}, concurrency=8))
    in_loop = stats.stored_flips
    one_pass = tally_output_flips(files.output, plan, rollouts)
    report = run_comparison(
        CompareRequest(baseline=rollouts, candidate=files.output, bootstrap=BootstrapSettings(resamples=10, seed=0))
    )
    assert report.overall.binary is not None
    expected = report.overall.binary.table
    assert in_loop == one_pass
    assert table(in_loop) == (expected.both_pass, expected.pass_to_fail, expected.fail_to_pass, expected.both_fail)
    assert in_loop.compared == report.coverage.compared and in_loop.masked == report.coverage.masked
    assert in_loop.flip_rate == pytest.approx(report.overall.binary.flip_rate)
    assert report.overall.delta is not None and in_loop.mean_delta == pytest.approx(report.overall.delta.mean_delta)
    assert stats.to_sidecar == sum(answer is None for answer in answers.values()) > 0, "failures are not compared"


def test_output_rows_without_a_stored_reward_are_counted_apart(tmp_path: Path) -> None:
    rollouts = write_jsonl(
        tmp_path / "rollouts.jsonl",
        [
            {"_ng_task_index": 0, "_ng_rollout_index": 0, "response": {}, "reward": 1.0},
            {"_ng_task_index": 0, "_ng_rollout_index": 1, "response": {}},
        ],
    )
    plan = scan_keys(rollouts).frame.rename({"offset": "rollout_offset", "line": "rollout_line"})
    output = write_jsonl(
        tmp_path / "out.jsonl",
        [
            {"_ng_task_index": task, "_ng_rollout_index": rollout, "reward": 0.0}
            for task, rollout in [(0, 1), (0, 0), (5, 0)]
        ],
    )
    flips = tally_output_flips(output, plan, rollouts)
    assert (flips.pass_to_fail, flips.compared, flips.unpaired) == (1, 1, 2), "no stored reward; a key the plan lacks"
    assert tally_output_flips(tmp_path / "none.jsonl", plan, rollouts) == StoredRewardFlips()
