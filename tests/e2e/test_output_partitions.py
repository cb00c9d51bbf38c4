"""Each output `reverify run` writes is a partition of the `reverify` and `judge_recovery` assets of its own."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest
from dagster._core.definitions.data_version import StaleStatus
from dagster._utils.test.data_versions import get_stale_status_resolver

from reverify_assets.defs.assets import ALL_ASSETS, OUTPUTS
from tests.e2e.test_resume_recovery_cli import judge_outage_run
from tests.support.cli import fake_dataset, run_against
from tests.support.fake_verifier import FakeVerifier
from tests.support.instance import open_instance

pytestmark = pytest.mark.slow
RECOVERY_KEYS = ["judge_failures", "recovery_payloads", "recovered_rows", "merged_rollouts", "merged_aggregate_metrics"]


def statuses(instance: dg.DagsterInstance, partition: Path, assets: list[str]) -> dict[str, StaleStatus]:
    resolver = get_stale_status_resolver(instance, ALL_ASSETS)  # as the UI's asset graph says it
    return {asset: resolver.get_status(dg.AssetKey(asset), str(partition)) for asset in assets}


def test_a_recovery_stays_in_sync_when_other_files_are_re_scored(tmp_path: Path) -> None:
    home = tmp_path / "h"
    with FakeVerifier() as server:
        inputs, _, first = judge_outage_run(tmp_path, server)
        merged = tmp_path / "merged.jsonl"
        recovered = run_against(tmp_path, server, inputs, first, merged, "--judge-failed-only")
        assert recovered.returncode == 0, recovered.stderr
        instance = open_instance(home)
        assert set(statuses(instance, merged, RECOVERY_KEYS).values()) == {StaleStatus.FRESH}
        # Other files, re-scored on the same instance: the `rollouts` they materialize are not the recovery's.
        (tmp_path / "other").mkdir()
        other_inputs, other_rollouts = fake_dataset(tmp_path / "other", ["ok", "wrong"])
        other = tmp_path / "other" / "out.jsonl"
        unrelated = run_against(tmp_path, server, other_inputs, other_rollouts, other)
        assert unrelated.returncode == 0, unrelated.stderr
    instance = open_instance(home)
    assert set(instance.get_dynamic_partitions(OUTPUTS.name)) == {str(first), str(merged), str(other)}
    assert set(statuses(instance, merged, ["rollouts", *RECOVERY_KEYS]).values()) == {StaleStatus.FRESH}
    history = {
        str(path): [
            record.run_id
            for record in instance.fetch_materializations(
                dg.AssetRecordsFilter(dg.AssetKey("rollouts"), asset_partitions=[str(path)]), limit=10
            ).records
        ]
        for path in (first, merged, other)
    }
    assert [len(runs) for runs in history.values()] == [1, 1, 1], "each output's rollouts: one run, its own"
    assert len({run for runs in history.values() for run in runs}) == 3


def test_a_recovery_appended_to_its_own_output_shares_that_outputs_partition(tmp_path: Path) -> None:
    """As the README says: one partition holds the file's whole history, and the recovery's assets are current."""
    home = tmp_path / "h"
    with FakeVerifier() as server:
        inputs, _, first = judge_outage_run(tmp_path, server)
        recovered = run_against(tmp_path, server, inputs, first, first, "--judge-failed-only", "--append")
        assert recovered.returncode == 0, recovered.stderr
    instance = open_instance(home)
    assert instance.get_dynamic_partitions(OUTPUTS.name) == [str(first)]
    runs_of_rollouts = instance.fetch_materializations(
        dg.AssetRecordsFilter(dg.AssetKey("rollouts"), asset_partitions=[str(first)]), limit=10
    ).records
    assert len(runs_of_rollouts) == 2, "the first run's source, then the recovery's (the output itself)"
    assert set(statuses(instance, first, ["rollouts", *RECOVERY_KEYS]).values()) == {StaleStatus.FRESH}
    assert statuses(instance, first, ["verify_payloads"]) == {"verify_payloads": StaleStatus.STALE}
