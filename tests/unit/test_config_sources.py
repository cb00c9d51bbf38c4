"""Config errors name the file or override that set the value: the last --config file that defines the key, the
``++`` override, or the default when nobody set it."""

from __future__ import annotations

from pathlib import Path

import pytest

from reverify_assets.config.loading import load_config
from reverify_assets.config.sources import DEFAULT, UNTRACKED
from reverify_assets.config.topology import ServerBlock
from reverify_assets.errors import ReverifyError
from reverify_assets.pipeline.preparation import load_verifier_setup

MCQA_BLOCK = "mcqa.resources_servers.mcqa"
MCQA = "mcqa:\n  resources_servers:\n    mcqa:\n"


def write_files(tmp_path: Path, texts: list[str]) -> list[Path]:
    """``a.yaml``, ``b.yaml``, ... in merge order."""
    paths = [tmp_path / f"{chr(ord('a') + number)}.yaml" for number in range(len(texts))]
    for path, text in zip(paths, texts, strict=True):
        path.write_text(text)
    return paths


def said(tmp_path: Path, expected: str) -> str:
    """``expected`` with ``<a>``, ``<b>``, ... standing for the files ``write_files`` wrote."""
    for letter in "abc":
        expected = expected.replace(f"<{letter}>", str(tmp_path / f"{letter}.yaml"))
    return expected


@pytest.mark.parametrize(
    ("texts", "overrides", "path", "expected"),
    [
        # Two files set the key: the later one is named.
        (["x: {k: 1}\n", "x: {k: 2}\n"], [], "x.k", "set in <b>"),
        # The later file adds to the mapping, but this key is the first file's.
        (["x: {k: 1}\n", "x: {j: 2}\n"], [], "x.k", "set in <a>"),
        # A mapping is set by every source that adds to it, in merge order.
        (
            [MCQA + "      k: 1\n", MCQA + "      j: 2\n"],
            [f"++{MCQA_BLOCK}.i=3"],
            MCQA_BLOCK,
            f"set in <a>, <b> and by ++{MCQA_BLOCK}.i on the command line",
        ),
        # An override is named as typed, without its value (it may be a pasted key).
        (["x: {k: 1}\n"], ["++x.k=secret"], "x.k", "set by ++x.k on the command line"),
        (["x: {k: 1}\n"], ["x.k=2"], "x.k", "set by x.k on the command line"),
        (["x: {k: 1}\n"], ["++x={k: 2}"], "x.k", "set by ++x on the command line"),
        # An interpolation: where it is written, and where what it names is set.
        (["base: {k: 1}\n", "x: {k: '${base.k}'}\n"], [], "x.k", "set in <b> as `${base.k}`; `base.k` set in <a>"),
        (
            ["base: {k: {j: 1}}\n", "alias: ${base}\n"],
            [],
            "alias.k.j",
            "set in <b> as `${base}`; `base.k.j` set in <a>",
        ),
        (["x: {k: 'http://${host}:1'}\nhost: h\n"], [], "x.k", "set in <a>"),  # text around it: its own file
        # Nobody set it: the default applies.
        (["x: {k: 1}\n"], [], "x.j", DEFAULT),
        (["x: {k: 1}\n"], [], "y", DEFAULT),
        # Inside a value (a list's item): the file that set the value.
        (["x: {k: [1, 2]}\n"], [], "x.k.1", "set in <a>"),
        # A value replaces the mapping that was there, and everything it held.
        (["x: {k: {j: 1}}\n", "x: {k: null}\n"], [], "x.k", "set in <b>"),
        (["x: {k: {j: 1}}\n", "x: {k: null}\n", "x: {k: {i: 2}}\n"], [], "x.k.j", DEFAULT),
    ],
)
def test_the_source_of_a_value(
    tmp_path: Path, texts: list[str], overrides: list[str], path: str, expected: str
) -> None:
    sources = load_config(write_files(tmp_path, texts), overrides).sources
    assert sources.name(path.split(".")) == f"`{path}` ({said(tmp_path, expected)})"


def test_a_config_built_in_code_names_the_path_alone() -> None:
    assert UNTRACKED.name(["a", "b"]) == "`a.b`"
    assert ServerBlock("mcqa", "mcqa", {}).named("grading_mode") == f"`{MCQA_BLOCK}.grading_mode`"


@pytest.mark.parametrize(
    ("texts", "overrides", "expected"),
    [
        # Every error that names a config path names the file or override that set it.
        (
            [MCQA + "      grading_mode: null\n", MCQA + "      grading_mdoe: x\n"],
            [],
            "`mcqa.resources_servers.mcqa.grading_mdoe` (set in <b>) is not a field",
        ),
        ([MCQA + "      grading_mode: x\n"], [], f"`{MCQA_BLOCK}.grading_mode` (set in <a>): Input should be"),
        (
            [MCQA + "      replicas: 2\n", MCQA + "      replicas: 0\n"],
            [],
            f"`{MCQA_BLOCK}.replicas` (set in <b>) is 0",
        ),
        (
            [MCQA + "      startup_timeout_s: 1\n"],
            ["++mcqa.resources_servers.mcqa.startup_timeout_s=-1"],
            "(set by ++mcqa.resources_servers.mcqa.startup_timeout_s on the command line) is -1",
        ),
        ([MCQA + "      implementation: nemo\n"], [], f"`{MCQA_BLOCK}.implementation` (set in <a>) is 'nemo'"),
        (
            [
                MCQA + "      grading_mode: null\n",
                "ag:\n  responses_api_agents:\n    s: {resources_server: {name: gone}}\n",
            ],
            [],
            "`ag.responses_api_agents.s.resources_server.name` (set in <b>) names resources server 'gone'",
        ),
        (
            [MCQA + "      grading_mode: null\n", "mcqa:\n  resource_servers:\n    mcqa: {grading_mode: x}\n"],
            [],
            "`mcqa.resource_servers` (set in <b>) is not a kind of server block (did you mean `resources_servers`?)",
        ),
        (
            [MCQA + "      grading_mode: null\n", "mcqa:\n  resources_servers:\n    mcq: {grading_mode: x}\n"],
            [],
            "`mcqa.resources_servers` declares 2 servers, where a block declares one: "
            f"`{MCQA_BLOCK}` (set in <a>), `mcqa.resources_servers.mcq` (set in <b>)",
        ),
        (
            [MCQA + "      grading_mode: null\n", "judge:\n  resources_servers:\n    equivalence_judge: {}\n"],
            [],
            f"no agent blocks to route rows by: `{MCQA_BLOCK}` (set in <a>), "
            "`judge.resources_servers.equivalence_judge` (set in <b>)",
        ),
        (
            [MCQA + "      grading_mode: ${nowhere}\n"],
            [],
            f"`{MCQA_BLOCK}.grading_mode` (set in <a> as `${{nowhere}}`; `nowhere` {DEFAULT}) cannot resolve "
            "interpolation: Interpolation key 'nowhere' not found",
        ),
    ],
)
def test_config_errors_name_the_file_that_set_the_value(
    tmp_path: Path, texts: list[str], overrides: list[str], expected: str
) -> None:
    with pytest.raises(ReverifyError) as caught:
        load_verifier_setup(write_files(tmp_path, texts), overrides)
    assert caught.value.exit_code == 1
    assert said(tmp_path, expected) in str(caught.value)
