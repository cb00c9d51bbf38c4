"""The issue's own trial: `--inputs` of one dataset, `--rollouts` of another with the same keys (two synthetic mcqa
sets of 50 tasks × 2, seeds 1 and 2). `reverify run` refuses them before anything is written, saying what a user
can act on; `--allow-prompt-mismatch` lets them through; `reverify compare` refuses two outputs of different
rollouts the same way."""

from __future__ import annotations

from pathlib import Path

import pytest

from reverify_assets.synthetic.mcqa_rollouts import (
    INPUTS_FILE_NAME,
    ROLLOUTS_FILE_NAME,
    SyntheticSpec,
    write_mcqa_dataset,
)
from tests.support.cli import MCQA_CONFIG, run_reverify, run_with_config

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def datasets(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    first, second = tmp_path_factory.mktemp("seed1"), tmp_path_factory.mktemp("seed2")
    write_mcqa_dataset(first, SyntheticSpec(tasks=50, rollouts_per_task=2, seed=1))
    write_mcqa_dataset(second, SyntheticSpec(tasks=50, rollouts_per_task=2, seed=2))
    return first, second


def test_rollouts_of_another_dataset_are_refused_before_anything_is_written(
    tmp_path: Path, datasets: tuple[Path, Path]
) -> None:
    first, second = datasets
    inputs, rollouts = first / INPUTS_FILE_NAME, second / ROLLOUTS_FILE_NAME
    output = tmp_path / "out" / "reverified.jsonl"
    done = run_with_config(MCQA_CONFIG, inputs, rollouts, output, home=tmp_path / "home")
    assert done.returncode == 1, done.stdout + done.stderr
    message = done.stderr
    assert f"100 of 100 rollouts in {rollouts} were not produced from the row of the same key" in message
    assert str(inputs) in message and "First: (task " in message and "rollouts line 1, inputs line" in message
    assert "\n  -You should output your final response letter" in message
    assert "\n  +You should output your final response letter" in message
    assert "--allow-prompt-mismatch" in message
    assert "Traceback" not in message
    assert not output.parent.exists() or not any(output.parent.iterdir())

    allowed = run_with_config(MCQA_CONFIG, inputs, rollouts, output, "--allow-prompt-mismatch", home=tmp_path / "home")
    assert allowed.returncode == 0, allowed.stderr
    assert "Metrics cover 100 of 100 rollouts" in allowed.stdout


def test_compare_refuses_two_outputs_of_different_rollouts(tmp_path: Path, datasets: tuple[Path, Path]) -> None:
    first, second = datasets
    ours = tmp_path / "ours.jsonl"
    done = run_with_config(MCQA_CONFIG, first / INPUTS_FILE_NAME, first / ROLLOUTS_FILE_NAME, ours, home=tmp_path / "h")
    assert done.returncode == 0, done.stderr
    # The same rollouts' output against the rollouts themselves: the same responses, compared without a word.
    assert run_reverify("compare", first / ROLLOUTS_FILE_NAME, ours, home=tmp_path / "h").returncode == 0

    other = second / ROLLOUTS_FILE_NAME
    refused = run_reverify("compare", ours, other, home=tmp_path / "h")
    assert refused.returncode == 1
    assert f"of the 100 keys in both {ours} and {other} hold different prompts" in refused.stderr
    assert "First: (task " in refused.stderr and "(candidate line 1, baseline line " in refused.stderr
    assert "--allow-prompt-mismatch" in refused.stderr
    allowed = run_reverify("compare", ours, other, "--allow-prompt-mismatch", home=tmp_path / "h")
    assert allowed.returncode == 0, allowed.stderr
