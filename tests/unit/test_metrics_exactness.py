"""The fast paths of the metrics maths against their references, bit for bit.

numpy (what pandas runs for NeMo Gym) against our pure-Python replicas; block-by-block sums against
whole-array ones; chunked columns against the values put in; batched group entries against one task at
a time; ``stdtrit`` against ``scipy.stats.t.interval``; a sum fed in pieces against one pass.
"""

from __future__ import annotations

import json
import math
import random
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from reverify_assets.metrics import column_scan
from reverify_assets.metrics import column_stats as cs
from reverify_assets.metrics.blocked_sum import BlockedSum, leaf_sizes
from reverify_assets.metrics.compact_column import CHUNK, MISSING, CompactColumn, present
from reverify_assets.metrics.describe import list_summary
from reverify_assets.metrics.group_batch import GroupBatch
from reverify_assets.metrics.group_entry import group_entry
from reverify_assets.metrics.summation import RunningSum, numpy_sum, python_sum

CONFORMANCE = Path(__file__).resolve().parents[1] / "data" / "conformance" / "mcqa"
LENGTHS = [*range(18), 31, 127, 128, 129, 255, 256, 257, 1000, 1023, 1024, 1025, 4097]


def _bits(value: Any) -> Any:
    """`value` with its float bits spelled out (so -0.0 != 0.0 and NaN == NaN)."""
    if isinstance(value, float):
        return ("float", struct.pack("<d", value))
    if isinstance(value, (tuple, list)):
        return [type(value).__name__, *map(_bits, value)]
    if isinstance(value, dict):
        return {key: _bits(item) for key, item in value.items()}
    return value


def _floats(rnd: random.Random, count: int, kind: str) -> list[float]:
    if kind == "spread":
        return [rnd.uniform(-1, 1) * 10 ** rnd.randint(-3, 9) for _ in range(count)]
    if kind == "rewards":
        return [rnd.choice([0.0, 1.0, 0.5, 0.25, 1 / 3, -0.0]) for _ in range(count)]
    return [float(rnd.randint(0, 2000)) for _ in range(count)]


# --- Sums ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("length", "kind"),
    [*((length, kind) for length in LENGTHS for kind in ("spread", "rewards", "tokens")), (10**6, "spread")],
)
def test_numpy_add_reduce_is_the_pairwise_replica(length: int, kind: str) -> None:
    values = _floats(random.Random(length), length, kind)
    assert _bits(float(np.add.reduce(np.array(values)))) == _bits(numpy_sum(values))


@pytest.mark.parametrize("leaf", [128, 200, 1000, 1 << 16])
@pytest.mark.parametrize("length", [0, 1, 129, 1000, 4097, 70_001])
def test_a_sum_fed_in_pieces_is_numpys_sum_of_the_whole(length: int, leaf: int) -> None:
    rnd = random.Random(length + leaf)
    values = np.array(_floats(rnd, length, "spread"))
    total = BlockedSum(length, leaf)
    start = 0
    while start < length:
        step = rnd.randint(1, 3 * CHUNK)
        total.feed(values[start : start + step])
        start += step
    assert sum(leaf_sizes(length, leaf)) == length
    assert _bits(total.total()) == _bits(float(np.add.reduce(values)))


def test_a_sum_fed_too_little_is_an_error() -> None:
    total = BlockedSum(10)
    total.feed(np.ones(9))
    with pytest.raises(ValueError, match="10 values"):
        total.total()


def _reference_python_sum(values: list[Any]) -> Any:
    """CPython 3.12's ``sum`` (Objects/bltinmodule.c), transcribed with no shortcut."""
    items = iter(values)
    int_total = 0
    for value in items:
        if type(value) is float:
            total = float(int_total) + value
            break
        int_total += value
    else:
        return int_total
    compensation = 0.0
    for value in items:
        if type(value) is float:
            running = total + value
            if abs(total) >= abs(value):
                compensation += (total - running) + value
            else:
                compensation += (value - running) + total
            total = running
        else:
            total += float(value)
    if compensation and math.isfinite(compensation):
        total += compensation
    return total


PYTHON_SUM_VALUES = [0, 1, 0.0, -0.0, 1.0, 0.1, 1 / 3, 1e16, -1e16, 7, 2.5, math.inf, -math.inf, math.nan]


@pytest.mark.parametrize("seed", range(300))
def test_python_sum_fed_in_pieces_is_cpythons_sum(seed: int) -> None:
    rnd = random.Random(seed)
    values = [rnd.choice(PYTHON_SUM_VALUES) for _ in range(rnd.randint(0, 40))]
    running = RunningSum()
    start = 0
    while start < len(values):
        step = rnd.randint(1, 7)
        running.extend(values[start : start + step])
        start += step
    expected = _reference_python_sum(values)
    assert _bits(running.total) == _bits(expected) and _bits(python_sum(values)) == _bits(expected)


# --- The t interval -----------------------------------------------------------------------------------------


def _conformance_intervals() -> list[tuple[float, float, int, tuple[float, float]]]:
    """(mean, standard error, count, NeMo Gym's interval) from the recorded repeat and across-repeat stats."""
    found = []
    for path in sorted(CONFORMANCE.glob("expected_aggregate_metrics_*.json")):
        (entry,) = json.loads(path.read_text("utf-8"))
        for repeat in entry["repeat_level_metrics"]:
            for key, mean in repeat.items():
                column = key.removeprefix("mean/")
                if key.startswith("mean/") and repeat.get(f"ci_low_95/{column}") is not None:
                    interval = (repeat[f"ci_low_95/{column}"], repeat[f"ci_high_95/{column}"])
                    found.append((mean, repeat[f"sem/{column}"], repeat["sample_count"], interval))
        agent = entry["agent_metrics"]
        for key, mean in agent.items():
            if key.startswith("mean_across_repeats/"):
                metric = key.split("/", 1)[1]
                interval = (agent[f"ci_low_95_across_repeats/{metric}"], agent[f"ci_high_95_across_repeats/{metric}"])
                found.append((mean, agent[f"se_across_repeats/{metric}"], agent["num_repeats"], interval))
    return found


def test_the_interval_is_nemo_gyms_recorded_one() -> None:
    intervals = _conformance_intervals()
    assert len(intervals) >= 40
    for mean, standard_error, count, expected in intervals:
        assert cs.confidence_interval(mean, standard_error, count) == expected


def test_the_interval_is_scipy_stats_t_interval() -> None:
    from scipy import stats

    rnd = random.Random(3)
    # A zero standard error is NeMo Gym's point interval, not scipy's (see the recorded intervals).
    cases = [(mean, se, count) for mean, se, count, _ in _conformance_intervals() if se]
    for _ in range(1000):
        count = rnd.choice([2, 3, 4, 5, 8, 16, 60, 25_000, 250_000, rnd.randint(2, 10**6)])
        mean = rnd.uniform(-1e3, 1e3) * 10 ** rnd.randint(-5, 3)
        cases.append((mean, abs(rnd.gauss(0, 1)) * 10 ** rnd.randint(-8, 3), count))
    for mean, se, count in cases:
        low, high = stats.t.interval(cs.CONFIDENCE, df=count - 1, loc=mean, scale=se)
        assert cs.confidence_interval(mean, se, count) == (float(low), float(high))


# --- Compact columns ----------------------------------------------------------------------------------------

COLUMN_KINDS = {
    "bytes": lambda rnd: rnd.choice([0, 1, 0.0, 1.0, 5, -3]),
    "shorts": lambda rnd: rnd.randint(-30_000, 30_000),
    "ints": lambda rnd: rnd.choice([rnd.randint(-(2**40), 2**40), 3.0]),
    "quarters": lambda rnd: rnd.choice([0.25, 0.5, 0.75, 1.0, 2.5]),
    "floats": lambda rnd: rnd.uniform(-1, 1) * 10 ** rnd.randint(-30, 30),
    "specials": lambda rnd: rnd.choice([-0.0, 0.0, math.inf, -math.inf, math.nan, MISSING, 1, 1.5]),
    "gaps": lambda rnd: rnd.choice([MISSING, MISSING, 7, 0.5]),
}


@pytest.mark.parametrize("length", [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK + 17])
@pytest.mark.parametrize("kind", list(COLUMN_KINDS))
def test_a_compact_column_gives_back_what_was_put_in(kind: str, length: int) -> None:
    rnd = random.Random(length)
    values = [COLUMN_KINDS[kind](rnd) for _ in range(length)]
    typed, plain = CompactColumn(keep_types=True), CompactColumn()
    for start in range(0, length, 5):
        typed.extend(values[start : start + 5])
        plain.extend(values[start : start + 5])
    assert len(typed) == len(plain) == length
    assert _bits(list(typed.values())) == _bits(values)
    chunks = list(plain.chunks())
    assert [len(chunk) for chunk in chunks] == [min(CHUNK, length - start) for start in range(0, length, CHUNK)]
    floats = [math.nan if value is MISSING else float(value) for value in values]
    read = [
        float(value) if kept else math.nan
        for chunk in chunks
        for value, kept in zip(chunk.tolist(), present(chunk).tolist(), strict=True)
    ]
    assert _bits(read) == _bits(floats)


def test_narrow_chunks_are_narrow() -> None:
    column = CompactColumn()
    column.extend([1, 0, 1.0, MISSING] * CHUNK)
    assert {chunk.dtype for chunk in column.chunks()} == {np.dtype(np.int8)}


# --- Column statistics --------------------------------------------------------------------------------------


def _column(values: list[Any]) -> CompactColumn:
    column = CompactColumn()
    column.extend(values)
    return column


@pytest.mark.parametrize("gaps", [0.0, 0.3, 1.0])
@pytest.mark.parametrize("kind", ["bytes", "shorts", "quarters", "floats", "specials"])
@pytest.mark.parametrize("length", [1, 2, 9, 129, CHUNK + 3, 70_001])
def test_a_column_summary_is_the_list_summary(length: int, kind: str, gaps: float) -> None:
    rnd = random.Random(length)
    values = [MISSING if rnd.random() < gaps else COLUMN_KINDS[kind](rnd) for _ in range(length)]
    floats = [math.nan if value is MISSING else float(value) for value in values]
    assert _bits(column_scan.gapped_summary(_column(values))) == _bits(list_summary(floats))


@pytest.mark.parametrize("kind", ["bytes", "shorts", "quarters", "floats"])
@pytest.mark.parametrize("length", [1, 2, 3, 10, 129, 5000])
def test_compact_stats_are_the_list_stats(length: int, kind: str) -> None:
    rnd = random.Random(length)
    floats = [float(COLUMN_KINDS[kind](rnd)) for _ in range(length)]
    pieces = list(_column(floats).chunks())
    stats = column_scan.compact_stats(pieces)
    expected = (
        length,
        cs.compact_mean(floats),
        cs.median(floats),
        cs.compact_std(floats),
        min(floats),
        max(floats),
        cs.quantile(floats, 0.25),
        cs.quantile(floats, 0.75),
    )
    assert _bits(tuple(stats)) == _bits(expected)  # type: ignore[arg-type]


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.float16, np.float64])
@pytest.mark.parametrize("length", [1, 2, 3, 4, 5, 100, 101, 10_000])
def test_order_statistics_are_numpys(length: int, dtype: type) -> None:
    rnd = np.random.default_rng(length)
    values = rnd.integers(-100, 100, length).astype(dtype) if dtype in (np.int8, np.int16) else rnd.random(length)
    values = values.astype(dtype)
    wide = values.astype(np.float64)
    assert column_scan.median(values.copy()) == float(np.median(wide)) == cs.median(wide.tolist())
    for q in (0.25, 0.75, 0.5, 0.9):
        assert column_scan.quantile(values.copy(), q) == float(np.quantile(wide, q)) == cs.quantile(wide.tolist(), q)


# --- Group entries ------------------------------------------------------------------------------------------


def _task_values(rnd: random.Random, count: int, kind: str) -> list[tuple[str, list[Any]]]:
    names = ["reward", "tokens", "score"]
    if kind == "ints":
        return [(name, [rnd.randint(0, 9) for _ in range(count)]) for name in names]
    if kind == "tokens":
        return [(name, [float(rnd.randint(1, 900)) for _ in range(count)]) for name in names]
    return [(name, [rnd.choice([0.0, 1.0, -0.0, math.inf, math.nan, 0.5]) for _ in range(count)]) for name in names]


@pytest.mark.parametrize("kind", ["tokens", "specials"])
@pytest.mark.parametrize("count", [1, 2, 3, 4, 7, 8, 9, 16, 200])
def test_batched_group_entries_are_the_one_task_entries(count: int, kind: str) -> None:
    rnd = random.Random(count)
    batch = GroupBatch()
    entries, expected = [], []
    for task in range(150):
        all_int = task == 40  # an all-int table has only ints
        values = _task_values(rnd, count if task % 7 else count + 1, "ints" if all_int else kind)
        infos = [{"rollout_id": f"{task}:{rollout}"} for rollout in range(len(values[0][1]))]
        entries += batch.add(task, values, all_int, infos)
        expected.append(group_entry(task, values, all_int, infos))
    entries += batch.flush()
    assert _bits(entries) == _bits(expected)
