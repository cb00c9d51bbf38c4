"""``reverify compare`` on small files: pairing in key order, coverage, provenance, bad input, flips,
breakdowns and key metrics."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest

from reverify_assets.cli.main import main
from reverify_assets.compare.bootstrap import BootstrapSettings
from reverify_assets.compare.comparison import CompareRequest, run_comparison
from reverify_assets.compare.key_metrics import HookChoice
from reverify_assets.compare.markdown import render_markdown
from reverify_assets.compare.paired_rows import join_keys, paired_rows
from reverify_assets.compare.provenance import MixedConfigsError
from reverify_assets.compare.report import CompareReport
from reverify_assets.compare.side_index import index_side
from reverify_assets.config.loading import load_config
from reverify_assets.config.topology import read_topology
from reverify_assets.errors import InputError
from reverify_assets.metrics.aggregate import aggregate_metrics
from reverify_assets.metrics.mcqa import compute_metrics, get_key_metrics
from tests.support.cli import MCQA_CONFIG, ROOT, read_jsonl, row_key, write_jsonl

SAMPLE_ROLLOUTS = ROOT / "samples" / "mcqa" / "rollouts.jsonl"
QUICK = BootstrapSettings(resamples=200, seed=1)


def row(task: int, rollout: int, reward: Any, *, agent: str = "agent_a", config: str | None = "c1", **extra: Any):
    result: dict[str, Any] = {"_ng_task_index": task, "_ng_rollout_index": rollout, "reward": reward}
    result["agent_ref"] = {"type": "responses_api_agents", "name": agent}
    if config is not None:
        result["reverify_provenance"] = {"config_hash": config, "server": "s", "type": "t", "reverify_mode": "x"}
    return {**result, **extra}


def compare(baseline: Path, candidate: Path, **options: Any) -> CompareReport:
    return run_comparison(CompareRequest(baseline=baseline, candidate=candidate, bootstrap=QUICK, **options))


def two_sides(tmp_path: Path, before: list[dict], after: list[dict]) -> tuple[Path, Path]:
    return write_jsonl(tmp_path / "before.jsonl", before), write_jsonl(tmp_path / "after.jsonl", after)


def test_pairs_come_in_key_order_whatever_order_the_files_are_in(tmp_path: Path) -> None:
    keys = [(task, rollout) for task in range(4) for rollout in range(3)]
    shuffled = keys[:]
    random.Random(3).shuffle(shuffled)
    before = [row(t, r, 1.0, config=None) for t, r in shuffled if (t, r) != (2, 1)]
    after = [row(t, r, 0.0, config="c2") for t, r in keys if (t, r) != (0, 0)] + [row(9, 0, 1.0, config="c2")]
    baseline, candidate = two_sides(tmp_path, before, after)
    left, right = index_side(baseline), index_side(candidate)
    pairs = list(paired_rows(join_keys(left.keys, right.keys), left.keys, right.keys))
    assert [pair.key for pair in pairs] == sorted([*keys, (9, 0)])
    for pair in pairs:
        assert (pair.baseline is None) == (pair.key in {(2, 1), (9, 0)})
        assert (pair.candidate is None) == (pair.key == (0, 0))
        for side in (pair.baseline, pair.candidate):
            assert side is None or row_key(side) == pair.key


def lines_of(rows: list[dict]) -> list[str]:
    return [orjson.dumps(r).decode() for r in rows]


@pytest.mark.parametrize(
    ("mutate", "line_no", "key"),
    [
        (lambda lines: lines.__setitem__(2, lines[2][:-3]), 3, None),  # malformed JSON
        (lambda lines: lines.insert(1, ""), 2, None),  # a blank line
        (lambda lines: lines.__setitem__(1, lines[1].replace('"reward":1.0,', "")), 2, None),  # no reward
        (lambda lines: lines.__setitem__(3, lines[3].replace('"reward":1.0', '"reward":"1"')), 4, None),
        (lambda lines: lines.__setitem__(0, lines[0].replace('"reward":1.0', '"reward":true')), 1, None),
        (lambda lines: lines.append(lines[1]), 2, "(task 0, rollout 1)"),  # a duplicate key, first at line 2
        (lambda lines: lines.__setitem__(0, lines[0].replace('"_ng_task_index":0,', "")), 1, None),
    ],
)
def test_bad_input_names_the_file_and_line(tmp_path: Path, mutate, line_no: int, key: str | None) -> None:
    lines = lines_of([row(0, r, 1.0) for r in range(4)])
    mutate(lines)
    baseline = tmp_path / "before.jsonl"
    baseline.write_text("".join(line + "\n" for line in lines))
    candidate = write_jsonl(tmp_path / "after.jsonl", [row(0, r, 1.0) for r in range(4)])
    with pytest.raises(InputError) as caught:
        compare(baseline, candidate, flips=tmp_path / "flips.jsonl")
    assert (caught.value.path, caught.value.line, caught.value.key) == (baseline, line_no, key)
    assert not (tmp_path / "flips.jsonl").exists()


def test_a_side_of_mixed_configs_is_refused_unless_allowed(tmp_path: Path) -> None:
    mixed = [row(0, r, 1.0, config="aaa") for r in range(3)] + [row(1, r, 0.0, config="bbb") for r in range(2)]
    baseline, candidate = two_sides(tmp_path, mixed, [row(t, r, 1.0, config="ccc") for t, r in map(row_key, mixed)])
    with pytest.raises(MixedConfigsError) as refused:
        compare(baseline, candidate)
    assert (refused.value.role, refused.value.path, refused.value.configs) == (
        "baseline",
        baseline,
        {"aaa": 3, "bbb": 2},
    )
    assert "pass --allow-mixed-configs to compare it anyway" in str(refused.value)
    report = compare(baseline, candidate, allow_mixed_configs=True)
    assert report.warnings == [
        f"{baseline} (baseline) mixes rows of 2 verifier configs: aaa (3 rows), bbb (2 rows); "
        "compared anyway (--allow-mixed-configs)"
    ]
    assert report.baseline.configs == {"aaa": 3, "bbb": 2}
    assert f"> **Warning:** {report.warnings[0]}" in render_markdown(report)


def test_original_rows_mixed_with_reverified_ones_are_mixed_but_original_alone_is_fine(tmp_path: Path) -> None:
    original = [row(0, r, 1.0, config=None) for r in range(2)]
    baseline, candidate = two_sides(tmp_path, original, [row(0, 0, 1.0, config=None), row(0, 1, 0.0, config="x")])
    with pytest.raises(MixedConfigsError) as refused:
        compare(baseline, candidate)
    assert (refused.value.role, refused.value.path, refused.value.configs) == (
        "candidate",
        candidate,
        {"original": 1, "x": 1},
    )
    assert compare(candidate, baseline, allow_mixed_configs=True).candidate.configs == {"original": 2}


def test_the_same_config_on_both_sides_is_reported(tmp_path: Path) -> None:
    baseline, candidate = two_sides(tmp_path, [row(0, 0, 1.0)], [row(0, 0, 1.0)])
    assert compare(baseline, candidate).warnings == [
        "both sides were scored by the same verifier config (c1): any difference is the verifier's nondeterminism"
    ]


def test_coverage_counts_every_key_and_reads_the_sidecars(tmp_path: Path) -> None:
    keys = [(task, rollout) for task in range(3) for rollout in range(2)]  # 6 keys
    before = [row(t, r, 1.0) for t, r in keys if (t, r) != (2, 1)]
    after = [row(t, r, 1.0, config="c2") for t, r in keys if (t, r) not in {(0, 0), (1, 1)}]
    baseline, candidate = two_sides(tmp_path, before, after)
    # The candidate failed (0, 0) twice (last: verify_failed) and (1, 1) once; (2, 0) failed, then succeeded.
    # The baseline failed (2, 1) and (7, 0), a key neither output has.
    write_jsonl(
        tmp_path / "after_failures.jsonl",
        [
            {**row(0, 0, 0.0), "_ng_failure_class": "judge_failed"},
            {**row(1, 1, 0.0), "_ng_failure_class": "judge_failed"},
            {**row(0, 0, 0.0), "_ng_failure_class": "verify_failed"},
            {**row(2, 0, 0.0), "_ng_failure_class": "verify_failed"},
        ],
    )
    write_jsonl(
        tmp_path / "before_failures.jsonl",
        [{"_ng_task_index": 2, "_ng_rollout_index": 1}, {**row(7, 0, 0.0), "_ng_failure_class": "x"}],
    )
    coverage = compare(baseline, candidate).coverage
    assert (coverage.baseline.rows, coverage.candidate.rows, coverage.in_both, coverage.compared) == (5, 4, 3, 3)
    assert (coverage.baseline.only_here, coverage.candidate.only_here) == (2, 1)
    assert coverage.only_baseline_failed_in_candidate == 2
    assert coverage.only_candidate_failed_in_baseline == 1
    assert coverage.candidate.failed_keys == 3
    assert coverage.candidate.failed_by_class == {"verify_failed": 2, "judge_failed": 1}
    assert coverage.candidate.failed_not_in_output == 2
    assert coverage.baseline.failed_by_class == {"unknown": 1, "x": 1}
    assert coverage.baseline.sidecar == str(tmp_path / "before_failures.jsonl")
    assert (coverage.failed_in_either, coverage.failed_in_neither_output) == (5, 1)


def test_without_sidecars_there_is_nothing_failed(tmp_path: Path) -> None:
    baseline, candidate = two_sides(tmp_path, [row(0, 0, 1.0)], [row(0, 0, 0.0, config="c2")])
    report = compare(baseline, candidate)
    assert report.coverage.baseline.sidecar is None
    assert report.coverage.failed_in_either == 0
    assert "failed in the baseline sidecar (there is none)" in render_markdown(report)


def test_masked_rows_are_counted_and_left_out(tmp_path: Path) -> None:
    before = [row(0, 0, 1.0), row(0, 1, 0.0), row(1, 0, 0.0)]
    after = [row(0, 0, 0.0, config="c2", mask_sample=True), row(0, 1, 1.0, config="c2"), row(1, 0, 0.0, config="c2")]
    baseline, candidate = two_sides(tmp_path, before, after)
    report = compare(baseline, candidate, flips=tmp_path / "flips.jsonl")
    assert (report.coverage.in_both, report.coverage.masked, report.coverage.compared) == (3, 1, 2)
    assert report.overall.rows == 2
    assert report.overall.binary is not None
    assert report.overall.binary.table.fail_to_pass == 1
    assert report.overall.binary.table.pass_to_fail == 0
    assert [row_key(line) for line in read_jsonl(tmp_path / "flips.jsonl")] == [(0, 1)]
    assert report.breakdowns[0].groups[0].masked == 1


def test_flips_are_exactly_the_changed_rows(tmp_path: Path) -> None:
    before = [row(t, r, float((t + r) % 2), extracted_answer="A") for t in range(5) for r in range(4)]
    after = [row(t, r, float(t % 2), config="c2", extracted_answer=None) for t in range(5) for r in range(4)]
    after[3] = {key: value for key, value in after[3].items() if key != "extracted_answer"}
    random.Random(1).shuffle(before)
    baseline, candidate = two_sides(tmp_path, before, after)
    report = compare(baseline, candidate, flips=tmp_path / "flips.jsonl")
    flips = read_jsonl(tmp_path / "flips.jsonl")
    expected = sorted((t, r) for t in range(5) for r in range(4) if (t + r) % 2 != t % 2)
    assert [row_key(line) for line in flips] == expected
    assert report.flips is not None and report.flips.rows == len(expected)
    assert report.overall.binary is not None and report.overall.binary.table.discordant == len(expected)
    assert flips[0] == {
        "_ng_task_index": 0,
        "_ng_rollout_index": 1,
        "agent": "agent_a",
        "baseline_reward": 1.0,
        "candidate_reward": 0.0,
        "baseline_extracted_answer": "A",
        "candidate_extracted_answer": None,
    }
    assert "candidate_extracted_answer" not in next(line for line in flips if row_key(line) == (0, 3))


def test_breakdown_by_agent_always_and_by_a_dotted_field(tmp_path: Path) -> None:
    before = [
        row(0, 0, 1.0, agent="a", meta={"level": "easy"}),
        row(0, 1, 0.0, agent="a", meta={"level": "hard"}),
        row(1, 0, 0.0, agent="b", meta={"level": 3}),
        row(1, 1, 1.0, agent="b"),
        row(2, 0, 1.0, agent="b", meta={"level": "easy"}),
    ]
    after = [{**r, "reward": 1.0, "reverify_provenance": {"config_hash": "c2"}} for r in before[:4]]
    baseline, candidate = two_sides(tmp_path, before, after)
    report = compare(baseline, candidate, by=["meta.level", "agent_ref.name"])
    assert [b.field for b in report.breakdowns] == ["agent_ref.name", "meta.level"]
    agents = {g.value: g for g in report.breakdowns[0].groups}
    assert (agents["a"].figures.rows, agents["b"].figures.rows, agents["b"].only_baseline) == (2, 2, 1)
    assert (agents["b"].baseline_rows, agents["b"].candidate_rows) == (3, 2)
    levels = {g.value: (g.figures.rows, g.only_baseline) for g in report.breakdowns[1].groups}
    assert levels == {"easy": (1, 1), "hard": (1, 0), "3": (1, 0), "(missing)": (1, 0)}
    figures_by_level = {g.value: g.figures for g in report.breakdowns[1].groups}
    assert figures_by_level["hard"].binary is not None
    assert figures_by_level["hard"].binary.table.fail_to_pass == 1


def test_a_field_with_a_value_per_row_gives_a_group_per_row(tmp_path: Path) -> None:
    before = [row(t, r, float(r % 2), rid=f"{t}-{r}") for t in range(50) for r in range(4)]
    after = [row(t, r, float(t % 2), config="c2", rid=f"{t}-{r}") for t in range(50) for r in range(4)]
    random.Random(2).shuffle(after)
    baseline, candidate = two_sides(tmp_path, before, after)
    (_, by_row) = compare(baseline, candidate, by=["rid"]).breakdowns
    assert len(by_row.groups) == 200
    for group in by_row.groups:
        task, rollout = map(int, group.value.split("-"))
        assert group.figures.delta is not None and group.figures.rows == 1
        assert group.figures.delta.mean_delta == float(task % 2) - float(rollout % 2)


def test_disjoint_sides_give_reasons_and_valid_json(tmp_path: Path) -> None:
    baseline, candidate = two_sides(tmp_path, [row(0, 0, 1.0)], [row(1, 0, 0.5, config="c2")])
    report = compare(baseline, candidate)
    assert (report.coverage.in_both, report.overall.rows) == (0, 0)
    assert report.overall.binary is None and report.overall.delta is None
    assert report.overall.binary_omitted == "no paired rows to compare"

    def no_constants(name: str) -> None:
        raise AssertionError(f"{name} in the JSON report")

    json.loads(report.model_dump_json(), parse_constant=no_constants)
    assert "Reward change: omitted: no paired rows to compare." in render_markdown(report)


def test_undefined_kappa_is_null_in_json_and_explained_in_markdown(tmp_path: Path) -> None:
    baseline, candidate = two_sides(tmp_path, [row(0, r, 1.0) for r in range(3)], [row(0, r, 1.0) for r in range(3)])
    report = compare(baseline, candidate)
    assert report.overall.binary is not None
    assert json.loads(report.model_dump_json())["overall"]["binary"]["kappa"]["value"] is None
    assert "κ undefined: expected agreement is 1" in render_markdown(report)


def mcqa_hooks() -> HookChoice:
    return HookChoice(read_topology(load_config([MCQA_CONFIG]).values), str(MCQA_CONFIG))


def test_key_metrics_of_a_side_without_a_metrics_file_are_computed_with_the_configs_hooks(tmp_path: Path) -> None:
    # The sample's rollouts are in completion order: computed in key order, they must equal NeMo Gym's maths
    # on the whole file at once.
    baseline = shutil.copy(SAMPLE_ROLLOUTS, tmp_path / "rollouts.jsonl")
    candidate = shutil.copy(SAMPLE_ROLLOUTS, tmp_path / "copy.jsonl")
    expected = aggregate_metrics(
        read_jsonl(SAMPLE_ROLLOUTS), compute_metrics=compute_metrics, get_key_metrics=get_key_metrics
    )["key_metrics"]
    report = compare(Path(baseline), Path(candidate), hooks=mcqa_hooks())
    (agent,) = report.key_metrics.agents
    assert agent.agent == "mcqa_simple_agent"
    assert (agent.baseline_rows, agent.candidate_rows) == (300, 300)
    assert {c.metric: c.baseline for c in agent.changes} == pytest.approx(expected)
    assert all(c.delta == 0 for c in agent.changes)
    assert report.key_metrics.baseline_source.kind == "computed"
    assert "the hooks of built-in 'mcqa' server 'mcqa'" in report.key_metrics.baseline_source.detail
    assert report.overall.rows == 300 and report.overall.binary is not None
    assert report.overall.binary.table.discordant == 0


def test_key_metrics_without_a_config_are_nemo_gyms_defaults(tmp_path: Path) -> None:
    baseline, candidate = two_sides(tmp_path, [row(0, 0, 1.0), row(0, 1, 0.0)], [row(0, 0, 1.0), row(0, 1, 1.0)])
    report = compare(baseline, candidate)
    assert report.key_metrics.baseline_source.detail == (
        "computed from the rows with NeMo Gym's default metrics (no --config)"
    )
    (agent,) = report.key_metrics.agents
    assert [(c.metric, c.baseline, c.candidate, c.delta) for c in agent.changes] == [("mean/reward", 0.5, 1.0, 0.5)]


def test_key_metrics_come_from_the_metrics_file_next_to_a_side(tmp_path: Path) -> None:
    rows = [row(0, 0, 1.0, _ng_environment_server="env_x"), row(0, 1, 0.0, _ng_environment_server="env_x")]
    baseline, candidate = two_sides(tmp_path, rows, rows)
    # NeMo Gym names an entry by its rows' environment server: it still meets the other side's agent.
    (tmp_path / "before_aggregate_metrics.json").write_bytes(
        orjson.dumps([{"agent_ref": {"name": "env_x"}, "key_metrics": {"mean/reward": 0.25, "x": None}}])
    )
    (tmp_path / "after_aggregate_metrics.json").write_bytes(
        orjson.dumps([{"agent_ref": {"name": "agent_a"}, "key_metrics": {"mean/reward": 0.75}}])
    )
    report = compare(baseline, candidate)
    assert report.key_metrics.baseline_source.kind == "file"
    assert report.key_metrics.baseline_source.detail == str(tmp_path / "before_aggregate_metrics.json")
    (agent,) = report.key_metrics.agents
    changes = [(c.metric, c.baseline, c.candidate, c.delta) for c in agent.changes]
    assert changes == [("mean/reward", 0.25, 0.75, 0.5), ("x", None, None, None)]


def test_a_broken_metrics_file_is_an_error_naming_it(tmp_path: Path) -> None:
    baseline, candidate = two_sides(tmp_path, [row(0, 0, 1.0)], [row(0, 0, 1.0, config="c2")])
    (tmp_path / "after_aggregate_metrics.json").write_text('[{"key_metrics": {}}]')
    with pytest.raises(InputError) as caught:
        compare(baseline, candidate)
    assert (caught.value.path, caught.value.line) == (tmp_path / "after_aggregate_metrics.json", None)


# --- The command line ------------------------------------------------------------------------------------------


def test_cli_writes_the_report_markdown_and_flips_next_to_the_output(tmp_path: Path, capsys) -> None:
    baseline, candidate = two_sides(
        tmp_path, [row(0, 0, 1.0), row(0, 1, 0.0)], [row(0, 0, 0.0, config="c2"), row(0, 1, 0.0, config="c2")]
    )
    report_path, markdown_path = tmp_path / "out" / "report.json", tmp_path / "out" / "report.md"
    code = main(
        [
            "compare",
            str(baseline),
            str(candidate),
            "-o",
            str(report_path),
            "--markdown",
            str(markdown_path),
            "--resamples",
            "50",
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    report = json.loads(report_path.read_text())
    assert report["flips"] == {"path": str(tmp_path / "out" / "report_flips.jsonl"), "rows": 1}
    assert [row_key(r) for r in read_jsonl(tmp_path / "out" / "report_flips.jsonl")] == [(0, 0)]
    assert markdown_path.read_text() == printed
    assert report["overall"]["delta"]["interval"]["resamples"] == 50


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--resamples", "0"], 2, "--resamples must be a positive number"),
        (["++a.b=1"], 2, "need a --config"),
        (["--flips", "{baseline}"], 2, "is an input of the comparison"),
        (["--config", "{missing}"], 1, "config file not found"),
    ],
)
def test_cli_usage_errors(tmp_path: Path, capsys, args: list[str], code: int, message: str) -> None:
    baseline, candidate = two_sides(tmp_path, [row(0, 0, 1.0)], [row(0, 0, 1.0, config="c2")])
    filled = [a.format(baseline=baseline, missing=tmp_path / "nope.yaml") for a in args]
    assert main(["compare", str(baseline), str(candidate), *filled]) == code
    assert message in capsys.readouterr().err
