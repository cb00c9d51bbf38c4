"""An output big enough for its aggregate's rows to be read by a process of their own (``aggregation_rows``):
the run's metrics and ``reverify aggregate``'s are those of the rows read in-process, the merged file the output
byte for byte, and nothing is left behind."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from reverify_assets.files.names import aggregate_metrics_path
from reverify_assets.metrics.coverage import COVERAGE_FIELD, PROVENANCE_BLOCK_FIELD
from reverify_assets.run.aggregation_rows import IN_PROCESS_BELOW_BYTES, rows_of_file
from reverify_assets.run.metrics_step import run_aggregation
from reverify_assets.run.preparation import load_verifier_setup
from reverify_assets.synthetic.mcqa_rollouts import SyntheticSpec, write_mcqa_dataset
from tests.support.cli import MCQA_CONFIG, run_mcqa, run_reverify

pytestmark = pytest.mark.slow

MODE = "++mcqa.resources_servers.mcqa.grading_mode=lenient_boxed"


def nemo_gym_sections(path: Path) -> list[dict[str, Any]]:
    """The entries of a metrics file without our coverage blocks, which depend on what else the run knew."""
    entries = orjson.loads(path.read_bytes())
    return [{k: v for k, v in entry.items() if k not in (COVERAGE_FIELD, PROVENANCE_BLOCK_FIELD)} for entry in entries]


def test_a_big_output_aggregates_as_if_read_in_process(tmp_path: Path) -> None:
    inputs, rollouts = write_mcqa_dataset(tmp_path / "data", SyntheticSpec(tasks=4_000, seed=5))
    output = tmp_path / "out" / "reverified.jsonl"
    result = run_mcqa(output, MODE, home=tmp_path / "home", inputs=inputs, rollouts=rollouts)
    assert result.returncode == 0, result.stderr
    assert output.stat().st_size >= IN_PROCESS_BELOW_BYTES  # else this test proves nothing

    in_process = tmp_path / "in_process_aggregate_metrics.json"
    setup = load_verifier_setup([MCQA_CONFIG], [MODE])
    run_aggregation(rows_of_file(output, in_process_below=1 << 40), setup, in_process)
    expected = nemo_gym_sections(in_process)
    assert expected[0]["key_metrics"]["mean/reward"] > 0
    assert nemo_gym_sections(aggregate_metrics_path(output)) == expected

    merged = tmp_path / "merged" / "all.jsonl"
    # NeMo Gym's health checks of these rows are test_rollout_health.py's subject, not this test's.
    result = run_reverify(
        "aggregate",
        "--config",
        MCQA_CONFIG,
        "--input-glob",
        output,
        "--output",
        merged,
        MODE,
        "--no-health-check",
        home=tmp_path / "home",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.index("Merged:") < result.stdout.index("Metrics:")
    assert merged.read_bytes() == output.read_bytes()
    assert nemo_gym_sections(aggregate_metrics_path(merged)) == expected
    assert sorted(path.name for path in merged.parent.iterdir()) == ["all.jsonl", "all_aggregate_metrics.json"]
