"""``reverify compare`` reads each entry's key metrics from a metrics file without building its per-task records."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from reverify_assets.compare.key_metrics import read_metrics_file
from reverify_assets.errors import InputError

GROUPS = [{"task": t, "rows": [{"reward": 1.0, "note": "x" * 50}]} for t in range(200)]


def entry(name: str, key_metrics: object, **extra: object) -> dict[str, object]:
    return {"agent_ref": {"name": name}, "agent_metrics": {"mean/reward": 0.5}, "key_metrics": key_metrics, **extra}


@pytest.mark.parametrize(
    ("entries", "expected"),
    [
        ([entry("a", {"mean/reward": 0.25, "pass@1": 25})], {"a": {"mean/reward": 0.25, "pass@1": 25.0}}),
        (
            [entry("a", {"m": 1.5}, group_level_metrics=GROUPS), entry("b", {"m": 2})],
            {"a": {"m": 1.5}, "b": {"m": 2.0}},
        ),
        (
            [entry("a", {"m": "n/a", "n": {"deep": 1}, "t": True, "z": None, "k": 3})],
            {"a": {"m": None, "n": None, "t": None, "z": None, "k": 3.0}},
        ),
        ([entry("a", None)], {"a": {}}),
        ([{"agent_ref": {"name": "a"}}], {"a": {}}),  # no key_metrics at all
        ([entry("a.b", {"pass@1.5": 0.5})], {"a.b": {"pass@1.5": 0.5}}),  # dots in names
        ([], {}),
    ],
)
def test_key_metrics_by_entry(tmp_path: Path, entries: list[object], expected: dict[str, object]) -> None:
    path = tmp_path / "m.json"
    path.write_bytes(orjson.dumps(entries, option=orjson.OPT_INDENT_2))
    assert read_metrics_file(path) == expected


@pytest.mark.parametrize(
    "content",
    [
        b'[{"agent_ref": {"name": "a"}, "key_metrics": {"m": 1}',  # malformed JSON
        b'{"agent_ref": {"name": "a"}}',  # not a list
        b'[{"key_metrics": {"m": 1}}]',  # entry 1 has no agent_ref.name
        b'[{"agent_ref": {"name": "a"}, "key_metrics": {}}, 7]',  # entry 2 has none
    ],
    ids=["malformed", "not a list", "no name", "not an entry"],
)
def test_bad_metrics_files_name_the_file(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "m.json"
    path.write_bytes(content)
    with pytest.raises(InputError) as caught:
        read_metrics_file(path)
    assert (caught.value.path, caught.value.line, caught.value.key) == (path, None, None)


def test_a_missing_metrics_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(InputError) as caught:
        read_metrics_file(tmp_path / "nope.json")
    assert caught.value.path == tmp_path / "nope.json"
    assert isinstance(caught.value.__cause__, FileNotFoundError)
