"""``reverify noise`` against the local judge, deterministic and told to flip verdicts, and ``compare --noise``."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import orjson
import pytest
from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

from tests.support.cli import run_reverify
from tests.support.judge_serve import LocalJudge
from tests.support.qa_judge import ROWS, Transcript, judge_config, qa_dataset, reverify

pytestmark = pytest.mark.slow
COPIES = 10  # 120 rows


def noise(
    tmp_path: Path, judge: LocalJudge, *flags: str, config: Path | None = None
) -> subprocess.CompletedProcess[str]:
    inputs, rollouts = qa_dataset(tmp_path, COPIES)
    args = ["noise", "--config", config or judge_config(tmp_path, judge), "--inputs", inputs, "--rollouts", rollouts]
    return run_reverify(*args, "--output", tmp_path / "noise" / "noise.json", *flags, home=tmp_path / "home")


def test_a_deterministic_judge_has_no_noise(tmp_path: Path, judge: LocalJudge) -> None:
    judge.control()
    done = noise(tmp_path, judge, "--sample", "50", "--repeats", "3")
    assert done.returncode == 0, done.stderr
    report = orjson.loads((tmp_path / "noise" / "noise.json").read_bytes())
    assert report["rows_scored_every_time"] == report["sampled_rows"] == 50 and report["scorings"] == 3
    agreement = report["agreement"]
    assert agreement["unstable_rows"] == 0 and agreement["noise_flip_rate"] == 0.0 and agreement["fleiss_kappa"] == 1.0
    assert judge.stats()["answered"] == 3 * 50, "every scoring asked the judge: no verdict came from a cache"
    assert "noise flip rate: 0.00%" in done.stdout and "Fleiss' κ: 1.000" in done.stdout
    assert not list((tmp_path / "noise").glob(".reverify-noise-*")), "the scorings' work folder is removed"


def test_a_judge_that_flips_verdicts_shows_its_noise(tmp_path: Path, judge: LocalJudge) -> None:
    judge.control(flip_share=0.1, seed=5)
    done = noise(tmp_path, judge, "--sample", "100", "--repeats", "4", "--seed", "3")
    assert done.returncode == 0, done.stderr
    report = orjson.loads((tmp_path / "noise" / "noise.json").read_bytes())
    ratings = np.array([row["rewards"] for row in report["rows"]])
    assert ratings.shape == (100, 4)
    agreement = report["agreement"]
    table, _ = aggregate_raters(ratings)
    assert agreement["fleiss_kappa"] == pytest.approx(fleiss_kappa(table, method="fleiss"))
    assert 0 < agreement["fleiss_kappa"] < 0.9 and agreement["unstable_rows"] > 10
    # Each verdict flips with chance 0.1: two scorings of a one-call row disagree with chance 2·0.1·0.9 = 0.18.
    assert 0.08 < agreement["noise_flip_rate"] < 0.35 and agreement["noise_flip_rate_se"] > 0
    assert agreement["unstable_rows"] == sum(len(set(row)) > 1 for row in ratings.tolist())
    assert judge.stats()["flipped"] > 0

    # Two runs of one config against that judge differ by its noise alone; a changed grader differs beyond it.
    for side in "abc":
        (tmp_path / side).mkdir()
    first = reverify(tmp_path / "a", judge, Transcript(), copies=COPIES)
    second = reverify(tmp_path / "b", judge, Transcript(), copies=COPIES)
    assert first.result.returncode == second.result.returncode == 0
    noise_report = tmp_path / "noise" / "noise.json"
    same = run_reverify("compare", first.output, second.output, "--noise", noise_report, home=tmp_path / "home")
    assert same.returncode == 0, same.stderr
    assert "## Against the noise floor" in same.stdout
    changed = sum(a["reward"] != b["reward"] for a, b in zip(first.rows, second.rows, strict=True))
    assert f"- {changed} of the {COPIES * ROWS} compared rows changed reward" in same.stdout
    assert "scored neither side" not in same.stdout

    judge.control()
    config = judge_config(tmp_path / "c", judge)
    config.write_text(config.read_text() + "      max_answer_chars: 3\n")  # longer answers now score 0
    strict = reverify(tmp_path / "c", judge, Transcript(), copies=COPIES, config=config)
    assert strict.result.returncode == 0, strict.result.stderr
    beyond = run_reverify("compare", first.output, strict.output, "--noise", noise_report, home=tmp_path / "home")
    assert beyond.returncode == 0, beyond.stderr
    p_value = float(beyond.stdout.split("or more) = ")[1].split()[0])
    assert p_value < 1e-3, beyond.stdout


def test_noise_refuses_what_cannot_work(tmp_path: Path, judge: LocalJudge) -> None:
    assert "--repeats must be at least 2, got 1" in noise(tmp_path, judge, "--repeats", "1").stderr
    bad = tmp_path / "bad.json"
    bad.write_text('{"kind": "something else"}')
    _, rollouts = qa_dataset(tmp_path)
    refused = run_reverify("compare", rollouts, rollouts, "--noise", bad, home=tmp_path / "home")
    assert refused.returncode == 1 and f"--noise {bad} is not a report of `reverify noise`" in refused.stderr
