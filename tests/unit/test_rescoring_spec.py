"""Rescoring files: what each field means, and the errors that name the file and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from reverify_assets.errors import ConfigError, InputError
from reverify_assets.rescoring.shard_keys import parse_shard_key, shard_key, source_id, task_range
from reverify_assets.rescoring.sources import discover_sources
from reverify_assets.rescoring.spec import load_rescorings


def project(tmp_path: Path, files: dict[str, str]) -> Path:
    (tmp_path / "configs" / "rescorings").mkdir(parents=True)
    (tmp_path / "configs" / "v.yaml").write_text("v:\n  resources_servers:\n    mcqa: {}\n")
    for name, text in files.items():
        (tmp_path / "configs" / "rescorings" / f"{name}.yaml").write_text(text)
    return tmp_path


def rescoring(output_dir: str, extra: str = "sources: {inputs: i.jsonl, rollouts: r.jsonl}\n") -> str:
    return f"verifier: {{config: [configs/v.yaml]}}\noutput_dir: {output_dir}\n{extra}"


def test_two_rescorings_may_not_share_an_output_dir(tmp_path: Path) -> None:
    root = project(tmp_path, {"a": rescoring("out"), "b": rescoring("out")})
    with pytest.raises(ConfigError) as caught:
        load_rescorings(root)
    assert (caught.value.key, caught.value.source) == ("output_dir", str(root / "configs" / "rescorings" / "b.yaml"))


@pytest.mark.parametrize("name", ["a__b", "_a", "9a"])
def test_names_that_would_collide_or_not_name_assets_are_refused(tmp_path: Path, name: str) -> None:
    root = project(tmp_path, {name: rescoring("out")})
    with pytest.raises(ConfigError) as caught:
        load_rescorings(root)
    assert caught.value.source == str(root / "configs" / "rescorings" / f"{name}.yaml")
    assert "must be letters, digits and single underscores" in str(caught.value)  # the rule a name must follow


@pytest.mark.parametrize("variant", ["comparison", "index_cache"])
def test_variant_names_that_are_folders_of_the_output_dir_are_refused(tmp_path: Path, variant: str) -> None:
    extra = f"sources: {{inputs: i.jsonl, rollouts: r.jsonl}}\nvariants: {{a: {{}}, {variant}: {{}}}}\n"
    root = project(tmp_path, {"r": rescoring("out", extra)})
    with pytest.raises(ConfigError) as caught:
        load_rescorings(root)
    assert caught.value.source == str(root / "configs" / "rescorings" / "r.yaml")
    assert f"variant name '{variant}' is reserved" in str(caught.value)  # its key is not set: the variant is named


def test_watched_folders_that_map_to_one_source_id_are_an_error(tmp_path: Path) -> None:
    root = project(tmp_path, {"w": rescoring("out", "watch: {folder: incoming, settle_s: 0}\n")})
    for folder in ("run.1", "run-1"):
        (root / "incoming" / folder).mkdir(parents=True)
        (root / "incoming" / folder / "rollouts.jsonl").write_text("")
        (root / "incoming" / folder / "rollouts_materialized_inputs.jsonl").write_text("")
    [spec] = load_rescorings(root)
    with pytest.raises(InputError) as caught:
        discover_sources(spec)
    assert caught.value.path == root / "incoming" / "run.1" / "rollouts.jsonl"  # the second, in sorted order
    assert str(root / "incoming" / "run-1" / "rollouts.jsonl") in str(caught.value)  # the first: no field holds it


@pytest.mark.parametrize(
    ("source", "number", "key", "tasks"),
    [("main", 0, "main.s00000", (0, 25)), ("run-7", 12, "run-7.s00012", (300, 325))],
)
def test_shard_keys(source: str, number: int, key: str, tasks: tuple[int, int]) -> None:
    assert shard_key(source, number) == key
    assert parse_shard_key(key) == (source, number)
    assert task_range(number, 25) == tasks


@pytest.mark.parametrize(
    ("relative", "expected"), [("a/b", "a-b"), ("run 1", "run-1"), ("x,y|z", "x-y-z"), ("", "source")]
)
def test_source_ids_keep_only_safe_characters(relative: str, expected: str) -> None:
    assert source_id(relative) == expected
