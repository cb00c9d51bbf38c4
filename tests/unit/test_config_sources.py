"""Config errors name the file or override that set the value: the last --config file that defines the key, the
``++`` override, or the default when nobody set it."""

from __future__ import annotations

from pathlib import Path

import pytest

from reverify_assets.config.loading import load_config
from reverify_assets.config.server_url import url_problem
from reverify_assets.config.sources import DEFAULT, NOT_SET, UNTRACKED
from reverify_assets.config.topology import ServerBlock
from reverify_assets.errors import ConfigError
from reverify_assets.run.preparation import load_verifier_setup
from reverify_assets.servers.judge.config import EquivalenceJudgeConfig

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
    ("texts", "overrides", "key", "source", "words"),
    [
        # Every error that names a config path names the file or override that set it.
        (  # an unknown field: its error's key is the block's, with no source; the field's are in words only
            [MCQA + "      grading_mode: null\n", MCQA + "      grading_mdoe: x\n"],
            [],
            MCQA_BLOCK,
            None,
            "`mcqa.resources_servers.mcqa.grading_mdoe` (set in <b>) is not a field",
        ),
        ([MCQA + "      grading_mode: x\n"], [], f"{MCQA_BLOCK}.grading_mode", "<a>", None),
        ([MCQA + "      replicas: 2\n", MCQA + "      replicas: 0\n"], [], f"{MCQA_BLOCK}.replicas", "<b>", None),
        (
            [MCQA + "      startup_timeout_s: 1\n"],
            [f"++{MCQA_BLOCK}.startup_timeout_s=-1"],
            f"{MCQA_BLOCK}.startup_timeout_s",
            f"++{MCQA_BLOCK}.startup_timeout_s",
            None,
        ),
        ([MCQA + "      implementation: nemo\n"], [], f"{MCQA_BLOCK}.implementation", "<a>", None),
        ([MCQA + "      url: localhost:8000\n"], [], f"{MCQA_BLOCK}.url", "<a>", None),
        (
            [
                MCQA + "      grading_mode: null\n",
                "ag:\n  responses_api_agents:\n    s: {resources_server: {name: gone}}\n",
            ],
            [],
            "ag.responses_api_agents.s.resources_server.name",
            "<b>",
            None,
        ),
        (
            [MCQA + "      implementation: nemo_gym\n", "nemo_gym_python: /no/such/python\n"],
            [],
            "nemo_gym_python",
            "<b>",
            None,
        ),
        (
            [MCQA + "      grading_mode: null\n", "mcqa:\n  resource_servers:\n    mcqa: {grading_mode: x}\n"],
            [],
            "mcqa.resource_servers",
            "<b>",
            "(did you mean `resources_servers`?)",
        ),
        (  # each of the two servers, with its own file
            [MCQA + "      grading_mode: null\n", "mcqa:\n  resources_servers:\n    mcq: {grading_mode: x}\n"],
            [],
            "mcqa.resources_servers",
            "<b>",
            f"`{MCQA_BLOCK}` (set in <a>), `mcqa.resources_servers.mcq` (set in <b>)",
        ),
        (  # no one key is at fault: each server, with its own file
            [MCQA + "      grading_mode: null\n", "judge:\n  resources_servers:\n    equivalence_judge: {}\n"],
            [],
            None,
            None,
            f"`{MCQA_BLOCK}` (set in <a>), `judge.resources_servers.equivalence_judge` (set in <b>)",
        ),
        (  # where the interpolation is written, and that nobody sets what it names
            [MCQA + "      grading_mode: ${nowhere}\n"],
            [],
            f"{MCQA_BLOCK}.grading_mode",
            "<a>",
            f"(set in <a> as `${{nowhere}}`; `nowhere` {NOT_SET})",
        ),
        (
            ["judge:\n  resources_servers:\n    equivalence_judge: {judge_base_url: 'http://'}\n"],
            [],
            "judge.resources_servers.equivalence_judge.judge_base_url",
            "<a>",
            None,
        ),
    ],
)
def test_config_errors_name_the_file_that_set_the_value(
    tmp_path: Path, texts: list[str], overrides: list[str], key: str | None, source: str | None, words: str | None
) -> None:
    with pytest.raises(ConfigError) as caught:
        load_verifier_setup(write_files(tmp_path, texts), overrides)
    assert (caught.value.key, caught.value.source) == (key, source and said(tmp_path, source))
    assert words is None or said(tmp_path, words) in str(caught.value)


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("not-a-url", "it is an http:// or https:// URL, such as http://127.0.0.1:8000"),
        ("localhost:8000", "it is an http:// or https:// URL (did you mean `http://localhost:8000`?)"),
        ("127.0.0.1:8000", "(did you mean `http://127.0.0.1:8000`?)"),
        ("ftp://x", "it is an http:// or https:// URL, such as"),
        ("http://", "it names no host"),
        ("https://:8000", "it names no host"),
        ("http://h:99999", "it is not a URL (Port out of range 0-65535)"),
        ("http://h:port", "it is not a URL"),
        ("http://h:0", "port 0 is not one a server listens on"),
        ("http://h:1/v1?key=x", "a base URL holds no query, fragment or spaces"),
        ("http://h 1:80", "a base URL holds no query, fragment or spaces"),
        (8000, "it is an http:// or https:// URL"),
        (True, "it is an http:// or https:// URL"),
        # Good ones.
        ("http://127.0.0.1:8000", None),
        ("http://127.0.0.1:8000/", None),
        ("https://api.example.com/v1", None),
        ("http://[::1]:8000", None),
        ("HTTP://Host", None),
    ],
)
def test_url_problems(url: object, problem: str | None) -> None:
    found = url_problem(url)
    assert found == problem if problem is None else (found is not None and problem in found)


@pytest.mark.parametrize("url", [None, ""])
def test_no_url_means_a_server_started_here(url: str | None) -> None:
    assert ServerBlock("mcqa", "mcqa", {"url": url}).url is None


def test_a_judge_model_server_url_is_checked_too() -> None:
    config = {
        "judge": {
            "resources_servers": {
                "equivalence_llm_judge": {"judge_model_server": {"type": "responses_api_models", "name": "m"}}
            }
        },
        "m": {"responses_api_models": {"openai_model": {"url": "m:8000"}}},
    }
    block = ServerBlock("judge", "equivalence_llm_judge", config["judge"]["resources_servers"]["equivalence_llm_judge"])
    with pytest.raises(ConfigError) as caught:
        block.referenced_models(config)
    assert caught.value.key == "m.responses_api_models.openai_model.url"


def test_the_judge_base_url_is_a_url() -> None:
    with pytest.raises(ValueError) as caught:
        EquivalenceJudgeConfig(judge_base_url="localhost:8765")
    assert "did you mean `http://localhost:8765`" in str(caught.value)
    assert EquivalenceJudgeConfig(judge_base_url="https://api.openai.com/v1").judge_base_url.endswith("/v1")
