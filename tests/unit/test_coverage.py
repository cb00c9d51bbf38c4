"""What the metrics cover: the coverage and provenance blocks (pure), and their counting as rows stream past."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import polars as pl
import pytest

from reverify_assets.config.topology import read_topology
from reverify_assets.errors import InputError
from reverify_assets.metrics.coverage import (
    ORIGINAL,
    Coverage,
    describe,
    describe_bounds,
    mixed_configs_message,
    provenance_block,
    total_coverage,
)
from reverify_assets.rows.result_routing import scoring_config as config_of
from reverify_assets.run.coverage_count import CoverageSources, PlannedKeys
from reverify_assets.run.metrics_step import run_aggregation
from reverify_assets.run.preparation import VerifierSetup

# --- The block and its bounds (pure) ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("coverage", "expected", "complete", "mean", "bounds"),
    [
        (Coverage(4, 3.0), 4, True, 0.75, (0.75, 0.75)),
        (Coverage(25, 10.0, Counter(judge_failed=12)), 37, False, 0.4, (10 / 37, 22 / 37)),
        (Coverage(6, 3.0, Counter(judge_failed=2, verify_failed=2), missing=2), 12, False, 0.5, (3 / 12, 9 / 12)),
        (Coverage(0, 0.0, Counter(judge_failed=3)), 3, False, None, (0.0, 1.0)),
        (Coverage(0, 0.0, missing=5), 5, False, None, (0.0, 1.0)),
        (Coverage(), 0, True, None, None),
        # The plan is unknown: nothing says the run is complete, and the bounds count the failures only.
        (Coverage(8, 4.0, missing=None), None, False, 0.5, (0.5, 0.5)),
        (Coverage(8, 4.0, Counter(x=2), missing=None), None, False, 0.5, (0.4, 0.6)),
    ],
    ids=["clean", "judge outage", "failed and missing", "all failed", "all missing", "nothing", "unknown", "unknown+"],
)
def test_coverage_counts_and_bounds(
    coverage: Coverage,
    expected: int | None,
    complete: bool,
    mean: float | None,
    bounds: tuple[float, float] | None,
) -> None:
    assert coverage.expected == expected
    assert coverage.complete is complete
    assert coverage.mean_reward == (pytest.approx(mean) if mean is not None else None)
    assert coverage.bounds == (pytest.approx(bounds) if bounds is not None else None)
    if mean is not None and bounds is not None:
        assert bounds[0] <= mean <= bounds[1]


def test_the_block_is_plain_json_and_reads_back() -> None:
    coverage = Coverage(25, 10.0, Counter(verify_failed=1, judge_failed=11), missing=1)
    block = coverage.block()
    assert block == {
        "expected": 38,
        "scored": 25,
        "failed": 12,
        "failed_by_class": {"judge_failed": 11, "verify_failed": 1},
        "missing": 1,
        "complete": False,
        "mean_reward": 0.4,
        "mean_reward_lower": 10 / 38,
        "mean_reward_upper": 23 / 38,
    }
    assert orjson.loads(orjson.dumps(block)) == block
    back = Coverage.from_block(block)
    assert (back.scored, back.failed_by_class, back.missing) == (25, coverage.failed_by_class, 1)
    assert back.reward_sum == pytest.approx(10.0)
    unknown = Coverage(3, 1.0, missing=None).block()
    assert unknown["expected"] == unknown["missing"] == "unknown" and unknown["complete"] is False
    assert Coverage.from_block(unknown).missing is None
    assert Coverage(2, float("nan")).block()["mean_reward"] is None


def test_entries_add_up_and_unknown_wins() -> None:
    first = Coverage(3, 2.0, Counter(judge_failed=1)).block()
    second = Coverage(5, 5.0, Counter(judge_failed=2, verify_failed=1), missing=2).block()
    total = total_coverage([first, second])
    assert (total.scored, total.failed, total.missing, total.expected) == (8, 4, 2, 14)
    assert total.reward_sum == pytest.approx(7.0)
    assert total_coverage([first, Coverage(1, 1.0, missing=None).block()]).expected is None


@pytest.mark.parametrize(
    ("coverage", "said"),
    [
        (Coverage(37, 15.0), "37 of 37 rollouts"),
        (Coverage(25, 10.0, Counter(judge_failed=12)), "25 of 37 rollouts (12 judge_failed)"),
        (
            Coverage(6, 3.0, Counter(verify_failed=2, judge_failed=3), missing=1),
            "6 of 12 rollouts (3 judge_failed, 2 verify_failed, 1 missing)",
        ),
        (Coverage(180, 81.0, missing=None), "180 rollouts (expected total unknown)"),
        (
            Coverage(8, 1.0, Counter(judge_failed=2), missing=None),
            "8 rollouts (2 judge_failed, expected total unknown)",
        ),
    ],
)
def test_describe(coverage: Coverage, said: str) -> None:
    assert describe(coverage) == said


@pytest.mark.parametrize(
    ("coverage", "said"),
    [
        (Coverage(4, 2.0), None),
        (Coverage(0, 0.0, Counter(judge_failed=2)), None),
        (
            Coverage(3, 3.0, Counter(judge_failed=1)),
            "mean reward 1.0000 over the scored rows; 0.7500 to 1.0000 with the 1 lost row counted as 0 or as 1",
        ),
    ],
)
def test_describe_bounds(coverage: Coverage, said: str | None) -> None:
    assert describe_bounds(coverage) == said


# --- Provenance (pure) ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("row", "config"),
    [
        ({"reverify_provenance": {"config_hash": "abc", "server": "mcqa"}}, "abc"),
        ({}, ORIGINAL),
        ({"reverify_provenance": None}, ORIGINAL),
        ({"reverify_provenance": {"config_hash": ""}}, ORIGINAL),
        ({"reverify_provenance": {"config_hash": 5}}, ORIGINAL),
    ],
)
def test_config_of(row: dict[str, Any], config: str) -> None:
    assert config_of(row) == config


@pytest.mark.parametrize(
    ("counts", "block"),
    [
        ({"abc": 4}, {"rows_by_config": {"abc": 4}, "mixed": False}),
        ({}, {"rows_by_config": {}, "mixed": False}),
        ({"b": 2, ORIGINAL: 6}, {"rows_by_config": {ORIGINAL: 6, "b": 2}, "mixed": True}),
    ],
)
def test_provenance_block(counts: dict[str, int], block: dict[str, Any]) -> None:
    assert provenance_block(counts) == block
    assert list(provenance_block(counts)["rows_by_config"]) == list(block["rows_by_config"]), "most rows first"


@pytest.mark.parametrize(
    ("counts", "parts"),
    [
        ({"abc": 90}, None),
        ({ORIGINAL: 90}, None),
        (
            {"abc": 90, "def": 100},
            ["2 different verifier configs", "config def (100 rows, e.g. s1.jsonl); config abc (90 rows, e.g. s0"],
        ),
        ({"abc": 90, ORIGINAL: 3}, ["rows without reverify_provenance ('original') (3 rows, e.g. s2.jsonl)"]),
    ],
    ids=["one config", "all original", "two configs", "one config and original rows"],
)
def test_mixed_configs_are_named_with_rows_and_a_file(counts: dict[str, int], parts: list[str] | None) -> None:
    files = {"abc": "s0.jsonl", "def": "s1.jsonl", ORIGINAL: "s2.jsonl"}
    message = mixed_configs_message(counts, files)
    if parts is None:
        assert message is None
    else:
        assert message is not None and "--allow-mixed-configs" in message
        assert all(part in message for part in parts), message


# --- Counting as the rows stream past ---------------------------------------------------------------------

AGENT = {"type": "responses_api_agents", "name": "agent_a"}
PROVENANCE = {"config_hash": "c1", "server": "mcqa", "type": "mcqa", "reverify_mode": "stateless"}


def row(task: int, rollout: int = 0, reward: float = 1.0, agent: str = "agent_a", **extra: Any) -> dict[str, Any]:
    return {
        "_ng_task_index": task,
        "_ng_rollout_index": rollout,
        "reward": reward,
        "agent_ref": {"type": "responses_api_agents", "name": agent},
        **extra,
    }


def failure(task: int, rollout: int = 0, failure_class: str = "judge_failed", **extra: Any) -> dict[str, Any]:
    return row(task, rollout, reward=0.0, _ng_failure_class=failure_class, **extra)


def jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    return path


def planned(tmp_path: Path, rows: list[dict[str, Any]]) -> PlannedKeys:
    """Keys planned from an inputs file holding ``rows`` (the rows a missing key is read back from)."""
    path = tmp_path / "inputs.jsonl"
    offsets, offset = [], 0
    for item in rows:
        offsets.append(offset)
        offset += len(orjson.dumps(item)) + 1
    jsonl(path, rows)
    frame = pl.DataFrame(
        {
            "task": [r["_ng_task_index"] for r in rows],
            "rollout": [r["_ng_rollout_index"] for r in rows],
            "offset": offsets,
            "line": list(range(1, len(rows) + 1)),
        }
    )
    return PlannedKeys.from_index(frame.reverse(), path)  # any order: the walk sorts


def setup(config: dict[str, Any] | None = None) -> VerifierSetup:
    config = config or {"mcqa": {"resources_servers": {"mcqa": {}}}}
    return VerifierSetup(config, read_topology(config), "c1", judge_cache=None)


def aggregate(
    tmp_path: Path, scored: list[dict[str, Any]], sources: CoverageSources, config: dict[str, Any] | None = None
) -> list[dict[str, Any]] | None:
    path = tmp_path / "m.json"
    aggregation = run_aggregation(iter(scored), setup(config), path, sources)
    if aggregation is None:
        assert not path.exists()
        return None
    written = orjson.loads(path.read_bytes())
    assert [{k: v for k, v in e.items() if k != "group_level_metrics"} for e in written] == aggregation.entries
    return written


def coverage_of(entry: dict[str, Any]) -> tuple[Any, ...]:
    block = entry["coverage"]
    return block["scored"], block["failed_by_class"], block["missing"], block["expected"], block["complete"]


def test_failed_keys_count_once_and_a_key_scored_later_is_scored(tmp_path: Path) -> None:
    sidecar = jsonl(
        tmp_path / "o_failures.jsonl",
        # (2, 0) failed three times (retries); (0, 1) failed, then succeeded; (5, 0) changed class on retry.
        [failure(2), failure(0, 1), failure(2), failure(5, 0, "verify_failed"), failure(2), failure(5)],
    )
    scored = [row(0, 0, 1.0), row(0, 1, 0.0), row(1, 0, 1.0), row(3, 0, 0.0)]
    expected = planned(tmp_path, [row(t, r) for t, r in [(0, 0), (0, 1), (1, 0), (2, 0), (3, 0), (4, 0), (5, 0)]])
    [entry] = aggregate(tmp_path, scored, CoverageSources.of([sidecar], [expected]))
    assert coverage_of(entry) == (4, {"judge_failed": 2}, 1, 7, False)
    assert entry["coverage"]["mean_reward"] == 0.5
    assert entry["coverage"]["mean_reward_lower"] == pytest.approx(2 / 7)
    assert entry["coverage"]["mean_reward_upper"] == pytest.approx(5 / 7)


@pytest.mark.parametrize(
    ("sidecars", "plan", "expected_coverage"),
    [
        ([], None, (3, {}, "unknown", "unknown", False)),
        ([[failure(7)]], None, (3, {"judge_failed": 1}, "unknown", "unknown", False)),
        ([], [(0, 0), (1, 0), (2, 0)], (3, {}, 0, 3, True)),
        ([], [(0, 0), (1, 0), (2, 0), (9, 9)], (3, {}, 1, 4, False)),
        # A key scored beyond the plan (an output resumed with another --limit) is scored, not lost.
        ([], [(0, 0)], (3, {}, 0, 3, True)),
        # Two sidecars (a recovery's source and output): each key once, the later file's class.
        (
            [[failure(4, 0, "verify_failed")], [failure(4, 0), failure(5)]],
            [(3, 0)],
            (3, {"judge_failed": 2}, 1, 6, False),
        ),
    ],
    ids=["no plan", "no plan, a failure", "plan complete", "plan, one missing", "scored beyond plan", "two sidecars"],
)
def test_coverage_table(
    tmp_path: Path, sidecars: list[list[dict[str, Any]]], plan: list[tuple[int, int]] | None, expected_coverage: tuple
) -> None:
    paths = [jsonl(tmp_path / f"s{n}_failures.jsonl", rows) for n, rows in enumerate(sidecars)]
    expected = None if plan is None else [planned(tmp_path, [row(t, r) for t, r in plan])]
    [entry] = aggregate(tmp_path, [row(0), row(1), row(2)], CoverageSources.of(paths, expected))
    assert coverage_of(entry) == expected_coverage


def test_each_agent_has_its_own_coverage_and_an_agent_with_no_scored_row_still_appears(tmp_path: Path) -> None:
    config = {
        "mcqa": {"resources_servers": {"mcqa": {}}},
        "agent_a": {"responses_api_agents": {"simple_agent": {"resources_server": {"name": "mcqa"}}}},
        "agent_b": {"responses_api_agents": {"simple_agent": {"resources_server": {"name": "mcqa"}}}},
        "agent_c": {"responses_api_agents": {"simple_agent": {"resources_server": {"name": "mcqa"}}}},
    }
    sidecar = jsonl(tmp_path / "o_failures.jsonl", [failure(1, agent_ref={"name": "agent_c"}), failure(3)])
    expected = planned(
        tmp_path, [row(0), row(1, agent="agent_c"), row(2, agent="agent_b"), row(3), row(4, agent="agent_c")]
    )
    scored = [row(0), row(2, agent="agent_b", reverify_provenance=PROVENANCE)]
    entries = aggregate(tmp_path, scored, CoverageSources.of([sidecar], [expected]), config)
    assert entries is not None
    assert [e["agent_ref"]["name"] for e in entries] == ["agent_a", "agent_b", "agent_c"]
    assert [coverage_of(e) for e in entries] == [
        (1, {"judge_failed": 1}, 0, 2, False),
        (1, {}, 0, 1, True),
        (0, {"judge_failed": 1}, 1, 2, False),
    ]
    unscored = entries[2]
    assert {
        k: unscored[k] for k in ("group_level_metrics", "agent_metrics", "key_metrics", "repeat_level_metrics")
    } == {
        "group_level_metrics": [],
        "agent_metrics": {},
        "key_metrics": {},
        "repeat_level_metrics": [],
    }
    assert [e["provenance"]["rows_by_config"] for e in entries] == [{ORIGINAL: 1}, {"c1": 1}, {}]


def test_nemo_gyms_fields_come_first_and_stay_as_they_were(tmp_path: Path) -> None:
    scored = [row(t, r, reward=float((t + r) % 2), reverify_provenance=PROVENANCE) for t in range(3) for r in range(2)]
    [plain] = aggregate(tmp_path, scored, CoverageSources())
    assert list(plain) == [
        "agent_ref",
        "group_level_metrics",
        "agent_metrics",
        "key_metrics",
        "repeat_level_metrics",
        "coverage",
        "provenance",
    ]
    sidecar = jsonl(tmp_path / "o_failures.jsonl", [failure(9)])
    [covered] = aggregate(tmp_path, scored, CoverageSources.of([sidecar], None))
    assert {k: v for k, v in covered.items() if k != "coverage"} == {k: v for k, v in plain.items() if k != "coverage"}
    assert plain["provenance"] == {"rows_by_config": {"c1": 6}, "mixed": False}


def test_no_row_of_any_kind_writes_no_file(tmp_path: Path) -> None:
    assert aggregate(tmp_path, [], CoverageSources()) is None
    unlabeled = {"_ng_task_index": 0, "_ng_rollout_index": 0, "reward": 1.0}
    assert aggregate(tmp_path, [unlabeled], CoverageSources.of([], [planned(tmp_path, [unlabeled])])) is None


def test_rows_out_of_key_order_are_refused(tmp_path: Path) -> None:
    config = {"svc": {"resources_servers": {"remote": {"url": "http://127.0.0.1:9"}}}}
    with pytest.raises(InputError) as caught:
        aggregate(tmp_path, [row(1), row(0)], CoverageSources(), config)
    assert caught.value.key == "(task 0, rollout 0)"


def test_sidecars_are_named_once_and_only_when_they_exist(tmp_path: Path) -> None:
    sidecar = jsonl(tmp_path / "o_failures.jsonl", [])
    sources = CoverageSources.of([sidecar, tmp_path / "none_failures.jsonl", tmp_path / "." / "o_failures.jsonl"], None)
    assert sources.sidecars == (sidecar,) and sources.expected is None
