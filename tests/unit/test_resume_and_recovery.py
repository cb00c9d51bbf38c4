"""NeMo Gym's resume rules, judge-failure selection, seeding, tail repair and run-label grouping."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import polars as pl
import pytest

from reverify_assets.config.topology import read_topology
from reverify_assets.errors import InputError, StateError
from reverify_assets.files.names import RunFiles
from reverify_assets.files.output_tail import repair_unterminated_tail
from reverify_assets.keys.key_index import scan_keys
from reverify_assets.recovery.judge_failures import index_judge_failures, iter_seed_lines, successes_to_seed
from reverify_assets.recovery.merge import seed_successes
from reverify_assets.resume.output_policy import OutputPolicy, check_resumed_configs
from reverify_assets.resume.settled_keys import max_attempts_from, read_cache, resume_summary
from reverify_assets.run.aggregation import LocalGroup, RemoteGroup, collect_groups


def jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    return path


def key(task: int, rollout: int = 0, **extra: Any) -> dict[str, Any]:
    return {"_ng_task_index": task, "_ng_rollout_index": rollout, **extra}


def test_nemo_gym_resume_example(tmp_path: Path) -> None:
    """20 done + 1 terminal + 1 key with 3 attempts + 1 key with 1 attempt (retried) -> 15 rows still to run.

    The contract counts "38 rows", but its own categories add up to 37 (20 + 1 + 1 + 15); 37 is the run
    it describes elsewhere ("12 of 37 materialized").
    """
    output = jsonl(tmp_path / "o.jsonl", [key(t, reward=1.0) for t in range(20)])
    sidecar = jsonl(
        tmp_path / "o_failures.jsonl",
        [key(20, _ng_failure_class="x", _ng_failure_terminal=True)]
        + [key(21, _ng_failure_class="verify_failed")] * 3
        + [key(22, _ng_failure_class="verify_failed")],
    )
    plan = pl.DataFrame({"task": list(range(37)), "rollout": [0] * 37})
    status = read_cache(output, sidecar, max_attempts=3)
    pending = status.pending(plan)
    assert pending.height == 15
    assert 22 in pending["task"].to_list() and 21 not in pending["task"].to_list()
    assert resume_summary(status, plan) == [
        "Resumed from cache. Found:",
        "  20 rows already in the output",
        "  1 rows with a terminal failure in the sidecar",
        "  1 rows that failed 3 times or more",
        "  15 rows that still need to be run",
    ]
    assert read_cache(output, sidecar, max_attempts=4).pending(plan).height == 16  # the 3-attempt key is back


def stamped(task: int, config: str | None) -> dict[str, Any]:
    return key(task, reward=1.0, **({} if config is None else {"reverify_provenance": {"config_hash": config}}))


@pytest.mark.parametrize(
    ("configs", "resume", "allow", "outcome"),
    [
        (["a", "a"], True, False, "ok"),
        ([], True, False, "ok"),  # nothing scored yet
        (["a", "b", "b"], True, False, "b (2 rows)"),
        (["a", None], True, False, "unknown grader"),  # NeMo Gym's own rows: resumed, with a warning
        ([None, None], True, False, "unknown grader"),
        (["a", None, "b"], True, False, "b (1 rows)"),
        (["b"], True, True, "warned"),
        (["b"], False, False, "ok"),  # --append (judge recovery) is not a resume: it warns elsewhere
    ],
)
def test_a_resume_onto_rows_of_another_config_is_refused_unless_allowed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, configs: list[str | None], resume: bool, allow: bool, outcome: str
) -> None:
    output = jsonl(tmp_path / "o.jsonl", [stamped(task, config) for task, config in enumerate(configs)])
    sidecar = jsonl(tmp_path / "o_failures.jsonl", [])
    cache = read_cache(output, sidecar, max_attempts=3)
    policy = OutputPolicy(resume=resume, append=not resume, allow_mixed_configs=allow)
    files = RunFiles.for_output(output)
    if outcome in ("ok", "warned", "unknown grader"):
        check_resumed_configs(files, cache, "a", policy)
        assert ("--allow-mixed-configs was given" in caplog.text) == (outcome == "warned")
        assert ("the grader of those rows is unknown" in caplog.text) == (outcome == "unknown grader")
    else:
        with pytest.raises(StateError) as caught:
            check_resumed_configs(files, cache, "a", policy)
        assert caught.value.path == output
        # The other configs and their rows (no field holds them), and the flag that would let the resume through.
        assert f"other verifier configs than this run's a: {outcome}" in str(caught.value)
        assert "pass --allow-mixed-configs" in str(caught.value)


@pytest.mark.parametrize(("flag", "env", "expected"), [(5, "7", 5), (None, "7", 7), (None, None, 3)])
def test_max_attempts_precedence(
    monkeypatch: pytest.MonkeyPatch, flag: int | None, env: str | None, expected: int
) -> None:
    if env is None:
        monkeypatch.delenv("NEMO_GYM_MAX_ROLLOUT_ATTEMPTS", raising=False)
    else:
        monkeypatch.setenv("NEMO_GYM_MAX_ROLLOUT_ATTEMPTS", env)
    assert max_attempts_from(flag) == expected


def test_judge_failures_are_selected_once_per_key_in_file_order(tmp_path: Path) -> None:
    sidecar = jsonl(
        tmp_path / "r_failures.jsonl",
        [
            key(5, _ng_failure_class="judge_failed", response={"n": 1}),
            key(1, _ng_failure_class="verify_failed"),
            key(5, _ng_failure_class="judge_failed", response={"n": 2}),
            key(2, _ng_failure_class="judge_invalid"),
            key(3, _ng_failure_class="agent_run_error"),
            key(4, _ng_failure_class="judge_failed"),
        ],
    )
    index = index_judge_failures(sidecar)
    assert index.frame["task"].to_list() == [5, 2, 4]
    assert index.frame["line"].to_list() == [1, 4, 6]
    assert index_judge_failures(sidecar, limit=2).frame["task"].to_list() == [5, 2]


def test_seeding_copies_missing_successes_verbatim_and_is_idempotent(tmp_path: Path) -> None:
    lines = [
        b'{"_ng_task_index":0,"_ng_rollout_index":0,"reward":1.0,  "odd spacing":true}\n',
        b'{"_ng_task_index":1,"_ng_rollout_index":0,"reward":0.0}\n',
        b'{"_ng_task_index":2,"_ng_rollout_index":0,"reward":1.0}\n',
    ]
    rollouts = tmp_path / "rollouts.jsonl"
    rollouts.write_bytes(b"".join(lines))
    output = jsonl(tmp_path / "out.jsonl", [key(1, reward=0.5)])
    successes = scan_keys(rollouts)
    assert list(iter_seed_lines(rollouts, successes_to_seed(successes, scan_keys(output).frame))) == [
        lines[0],
        lines[2],
    ]
    assert seed_successes(successes, output) == 2
    assert seed_successes(successes, output) == 0
    assert output.read_bytes().splitlines(keepends=True)[1:] == [lines[0], lines[2]]


@pytest.mark.parametrize(
    ("content", "after", "said"),
    [
        (b'{"a":1}\n{"a":2}\n', b'{"a":1}\n{"a":2}\n', None),
        (b'{"a":1}\n{"a":2', b'{"a":1}\n', "dropped an incomplete last line"),
        (b'{"a":1}\n{"a":2}', b'{"a":1}\n{"a":2}\n', "added the missing newline"),
        (b'{"a":', b"", "dropped an incomplete last line"),
        (b"", b"", None),
    ],
)
def test_unterminated_tail_is_repaired(tmp_path: Path, content: bytes, after: bytes, said: str | None) -> None:
    path = tmp_path / "o.jsonl"
    path.write_bytes(content)
    repair = repair_unterminated_tail(path)
    assert path.read_bytes() == after
    assert (repair is None) if said is None else (repair is not None and said in repair.message)
    if repair is not None:
        repair.undo()
        assert path.read_bytes() == content


def test_seeded_and_recovered_rows_of_one_agent_form_one_entry() -> None:
    topology = read_topology({"mcqa": {"resources_servers": {"mcqa": {}}}})
    agent = {"type": "responses_api_agents", "name": "mcqa_simple_agent"}
    rows = [
        key(0, reward=1.0, agent_ref=agent, _ng_environment_server="mcqa_environment_server"),
        key(1, reward=0.0, agent_ref=agent),  # recovered: built from inputs, no environment server
        key(2, reward=1.0, agent_ref={"name": "other"}),
        key(3, reward=1.0),  # no run label: skipped, as NeMo Gym does
    ]
    groups = collect_groups(rows, topology)
    assert [(g.label, g.rows) for g in groups] == [("mcqa_environment_server", 2), ("other", 1)]
    for group in groups:
        group.close()


@pytest.mark.parametrize(
    ("fields", "kind"),
    [({}, LocalGroup), ({"url": "http://127.0.0.1:9"}, RemoteGroup)],
    ids=["built-in: computed here", "reached by url: asked"],
)
def test_a_built_in_servers_metrics_are_computed_here_and_a_remote_ones_asked(
    fields: dict[str, str], kind: type
) -> None:
    topology = read_topology({"mcqa": {"resources_servers": {"mcqa": fields}}})
    groups = collect_groups([key(0, reward=1.0, agent_ref={"name": "a"})], topology)
    assert [type(group) for group in groups] == [kind]
    for group in groups:
        group.close()


def test_rows_out_of_key_order_are_refused_by_name() -> None:
    topology = read_topology({"mcqa": {"resources_servers": {"mcqa": {}}}})
    rows = [key(task, reward=1.0, agent_ref={"name": "a"}) for task in (1, 0)]
    with pytest.raises(InputError) as caught:
        collect_groups(rows, topology)
    # The agent's name and the row's key are in the words only: the error sets no field.
    assert "aggregate metrics of 'a'" in str(caught.value) and "out of key order" in str(caught.value)


def test_reading_back_a_row_that_moved_is_an_error(tmp_path: Path) -> None:
    from reverify_assets.run.row_source import PairReader

    inputs = jsonl(tmp_path / "i.jsonl", [key(0), key(1)])
    rollouts = jsonl(tmp_path / "r.jsonl", [key(0, response={}), key(1, response={})])
    offsets = scan_keys(rollouts).frame["offset"].to_list()
    with PairReader(inputs, rollouts) as pairs:
        assert pairs.read((1, 0), (scan_keys(inputs).frame["offset"][1], 2), (offsets[1], 2)).payload["response"] == {}
        with pytest.raises(InputError) as caught:
            pairs.read((1, 0), (scan_keys(inputs).frame["offset"][1], 2), (offsets[0], 1))
    assert (caught.value.path, caught.value.line, caught.value.key) == (rollouts, 1, "(task 0, rollout 0)")
