"""``reverify aggregate``'s merge and metrics: the shards' index the command started is taken, not made again."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest

from reverify_assets.errors import InputError
from reverify_assets.processes.prefetch import PrefetchedWork
from reverify_assets.run import shard_aggregation
from reverify_assets.run.preparation import load_verifier_setup
from reverify_assets.run.shard_aggregation import aggregate_shards, shard_files, start_shard_index
from tests.support.cli import CONFORMANCE_ROLLOUTS, MCQA_CONFIG


@pytest.fixture
def shard(tmp_path: Path) -> Path:
    return Path(shutil.copy(CONFORMANCE_ROLLOUTS, tmp_path / "shard.jsonl"))


def indexes_made(monkeypatch: pytest.MonkeyPatch) -> list[list[Path]]:
    made: list[list[Path]] = []
    index = shard_aggregation._index

    def counted(shards: list[Path]) -> object:
        made.append(shards)
        return index(shards)

    monkeypatch.setattr(shard_aggregation, "_index", counted)
    return made


def test_the_index_the_command_started_is_taken(shard: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    made, work, merged = indexes_made(monkeypatch), PrefetchedWork(), shard.with_name("merged.jsonl")
    start_shard_index(work, shard_files(str(shard), merged))
    result = aggregate_shards(
        str(shard), merged, load_verifier_setup([MCQA_CONFIG], []), work, allow_mixed_configs=False
    )
    assert len(made) == 1 and result.rows == 180 and result.merged
    assert sorted(merged.read_bytes().splitlines()) == sorted(shard.read_bytes().splitlines())
    [entry] = orjson.loads(shard.with_name("merged_aggregate_metrics.json").read_bytes())
    assert entry["coverage"]["scored"] == 180


def test_a_shard_changed_since_its_index_started_is_indexed_again(shard: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    made, work, merged = indexes_made(monkeypatch), PrefetchedWork(), shard.with_name("merged.jsonl")
    start_shard_index(work, shard_files(str(shard), merged))
    rows = shard.read_bytes().splitlines(keepends=True)
    shard.write_bytes(b"".join(rows[:100]))
    result = aggregate_shards(
        str(shard), merged, load_verifier_setup([MCQA_CONFIG], []), work, allow_mixed_configs=False
    )
    assert len(made) == 2 and result.rows == 100


def test_a_glob_that_names_nothing_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError) as caught:
        shard_files(str(tmp_path / "none*.jsonl"), tmp_path / "merged.jsonl")
    assert repr(str(tmp_path / "none*.jsonl")) in str(caught.value)  # the glob: no field holds it
