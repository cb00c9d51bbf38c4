"""Config mistakes are errors naming the path and the closest name, never a silent default or a new block."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf
from pydantic import BaseModel

from reverify_assets.cli.main import main
from reverify_assets.config.known_fields import (
    NEMO_GYM_BLOCK_FIELDS,
    REVERIFY_BLOCK_FIELDS,
    model_field_names,
    unknown_field_problems,
)
from reverify_assets.config.loading import load_config
from reverify_assets.config.topology import ServerBlock
from reverify_assets.errors import ConfigError, UsageError
from reverify_assets.run.preparation import load_verifier_setup
from reverify_assets.servers.judge.config import EquivalenceJudgeConfig
from reverify_assets.servers.mcqa.server import MCQAServerConfig
from reverify_assets.servers.registry import validate_builtin_block

ROOT = Path(__file__).resolve().parents[2]
MCQA_CONFIG, JUDGE_CONFIG = ROOT / "configs" / "mcqa.yaml", ROOT / "configs" / "judge.yaml"
MCQA_BLOCK, JUDGE_BLOCK = "mcqa.resources_servers.mcqa", "judge.resources_servers.equivalence_judge"
SAMPLES = ROOT / "samples" / "mcqa"


def shipped_fields(config: Path) -> list[Any]:
    """A param (instance, type, field name, value) per field of the resources server blocks of a shipped config."""
    loaded = OmegaConf.to_container(OmegaConf.load(config))
    assert isinstance(loaded, dict)
    return [
        pytest.param(instance, server_type, name, value, id=f"{config.name}:{name}")
        for instance, block in loaded.items()
        for server_type, fields in block["resources_servers"].items()
        for name, value in fields.items()
    ]


def load(tmp_path: Path, yaml: str, overrides: list[str]) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(yaml)
    load_verifier_setup([path], overrides)


# A judge and an mcqa server side by side need agent blocks to route rows: these two route nothing.
AGENTS = (
    "a_mcqa:\n  responses_api_agents:\n    simple_agent:\n      resources_server: {name: mcqa}\n"
    "a_judge:\n  responses_api_agents:\n    simple_agent:\n      resources_server: {name: judge}\n"
)
MCQA_YAML = "mcqa:\n  resources_servers:\n    mcqa:\n"
BOTH = MCQA_CONFIG.read_text() + JUDGE_CONFIG.read_text() + AGENTS


def override_key(override: str) -> tuple[str, str]:
    """The (key, source) of an error about ``override``: its dotted key, and the override without its value."""
    source = override.partition("=")[0]
    return source.lstrip("+"), source


# An unknown field's error has the block as its key and no source: the field and where it was set are in words only.
@pytest.mark.parametrize(
    ("yaml", "overrides", "fields", "said"),
    [
        # A misspelt field of a built-in server, in a file or in an override.
        (
            MCQA_YAML + "      grading_mdoe: lenient_boxed\n",
            [],
            (MCQA_BLOCK, None),
            f"`{MCQA_BLOCK}.grading_mdoe` (set in <c>) is not a field of the built-in `mcqa` server "
            "(did you mean `grading_mode`?)",
        ),
        (
            BOTH,
            [f"++{MCQA_BLOCK}.grading_mdoe=lenient_boxed"],
            (MCQA_BLOCK, None),
            f"`{MCQA_BLOCK}.grading_mdoe` (set by ++{MCQA_BLOCK}.grading_mdoe on the command line) is not a field",
        ),
        (BOTH, [f"++{JUDGE_BLOCK}.judge_modle=gpt"], (JUDGE_BLOCK, None), "(did you mean `judge_model`?)"),
        (
            BOTH,
            [f"++{JUDGE_BLOCK}.judge_prompt_templte=x"],
            (JUDGE_BLOCK, None),
            "(did you mean `judge_prompt_template`?)",
        ),
        # NeMo Gym's descriptive fields and our own block fields are spell-checked too.
        (
            BOTH,
            [f"++{MCQA_BLOCK}.descripton=x"],
            (MCQA_BLOCK, None),
            f"`{MCQA_BLOCK}.descripton` (set by ++{MCQA_BLOCK}.descripton on the command line) is not a field of "
            "the built-in `mcqa` server (did you mean `description`?)",
        ),
        (BOTH, [f"++{MCQA_BLOCK}.replica=2"], (MCQA_BLOCK, None), "(did you mean `replicas`?)"),
        # Nothing close: the server's own fields are listed.
        (BOTH, [f"++{MCQA_BLOCK}.frobnicate=1"], (MCQA_BLOCK, None), "`mcqa` server (its fields: grading_mode)"),
        # Every unknown field is named at once.
        (
            MCQA_YAML + "      grading_mdoe: x\n      domian: y\n",
            [],
            (MCQA_BLOCK, None),
            "(did you mean `grading_mode`?); `mcqa.resources_servers.mcqa.domian` (set in <c>) is not a field of "
            "the built-in `mcqa` server (did you mean `domain`?)",
        ),
        # An override into a block no file declares.
        (
            BOTH,
            ["++mcqq.resources_servers.mcqa.grading_mode=x"],
            override_key("++mcqq.resources_servers.mcqa.grading_mode"),
            "names `mcqq`, which no --config file declares (did you mean `mcqa` (set in <c>)?)",
        ),
        (
            BOTH,
            ["++jugde.resources_servers.equivalence_judge.judge_model=x"],
            override_key("++jugde.resources_servers.equivalence_judge.judge_model"),
            "(did you mean `judge` (set in <c>)?)",
        ),
        (
            BOTH,
            ["++mcqa.resource_servers.mcqa.grading_mode=x"],
            override_key("++mcqa.resource_servers.mcqa.grading_mode"),
            "names `mcqa.resource_servers`, which no --config file declares "
            "(did you mean `mcqa.resources_servers` (set in <c>)?)",
        ),
        (
            BOTH,
            ["+mcqa.resources_servers.mcq.grading_mode=x"],
            override_key("+mcqa.resources_servers.mcq.grading_mode"),
            "names `mcqa.resources_servers.mcq`, which no --config file declares "
            "(did you mean `mcqa.resources_servers.mcqa` (set in <c>)?)",
        ),
        (
            BOTH,
            ["++zzz.resources_servers.mcqa.grading_mode=x"],
            override_key("++zzz.resources_servers.mcqa.grading_mode"),
            "names `zzz`, which no --config file declares (declared: `a_judge`, `a_mcqa`, `judge`, `mcqa`)",
        ),
        # A top-level scalar is a knob, not a block: nothing lies below it.
        (
            MCQA_YAML + "      grading_mode: null\nmerge_shards: true\n",
            ["++merge_shards.x=1"],
            override_key("++merge_shards.x"),
            "names `merge_shards`",
        ),
    ],
)
def test_typos_are_errors_naming_the_path_and_the_closest_name(
    tmp_path: Path, yaml: str, overrides: list[str], fields: tuple[str, str | None], said: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, yaml, overrides)
    assert (caught.value.key, caught.value.source) == fields
    assert said.replace("<c>", str(tmp_path / "c.yaml")) in str(caught.value)  # the closest name, and where it is


def test_a_misspelt_override_never_echoes_its_value(tmp_path: Path) -> None:
    override = "++jduge.resources_servers.equivalence_judge.judge_model=s3cr3t"
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, BOTH, [override])
    assert (caught.value.key, caught.value.source) == override_key(override)
    assert "did you mean `judge`" in str(caught.value) and "s3cr3t" not in str(caught.value)


def test_the_cli_stops_before_anything_starts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    output = tmp_path / "out" / "rescored.jsonl"
    argv = ["run", "--config", str(MCQA_CONFIG), "--inputs", str(SAMPLES / "rollouts_materialized_inputs.jsonl")]
    argv += ["--rollouts", str(SAMPLES / "rollouts.jsonl"), "--output", str(output)]
    assert main([*argv, f"++{MCQA_BLOCK}.grading_mdoe=lenient_boxed"]) == 1
    assert f"`{MCQA_BLOCK}.grading_mdoe` (set by ++{MCQA_BLOCK}.grading_mdoe on the command line) is not a field" in (
        capsys.readouterr().err
    )
    assert not output.parent.exists()


@pytest.mark.parametrize(
    ("instance", "server_type", "name", "value"), [*shipped_fields(MCQA_CONFIG), *shipped_fields(JUDGE_CONFIG)]
)
def test_every_field_of_the_shipped_configs_is_accepted(instance: str, server_type: str, name: str, value: Any) -> None:
    validate_builtin_block(ServerBlock(instance, server_type, {name: value}))


@pytest.mark.parametrize("config", [MCQA_CONFIG, JUDGE_CONFIG])
def test_the_shipped_configs_load(config: Path) -> None:
    load_verifier_setup([config], [])


# url is left out: a block with one is not checked at all (below).
@pytest.mark.parametrize("name", sorted(NEMO_GYM_BLOCK_FIELDS | (REVERIFY_BLOCK_FIELDS - {"url"})))
@pytest.mark.parametrize("model", [MCQAServerConfig, EquivalenceJudgeConfig])
def test_nemo_gym_and_reverify_block_fields_are_accepted(name: str, model: type[BaseModel]) -> None:
    block = ServerBlock("s", "t", {name: "anything"})
    assert unknown_field_problems(block, model_field_names(model)) == []


@pytest.mark.parametrize("name", ["prompt_template", "judge_prompt_template"])
def test_a_field_is_accepted_by_its_name_and_its_aliases(name: str) -> None:
    template = "{question} {expected_answer} {generated_answer}"
    validate_builtin_block(ServerBlock("judge", "equivalence_judge", {name: template}))


@pytest.mark.parametrize(
    "yaml",
    [
        # A running server may be any server: none of its fields is checked, whatever its type.
        MCQA_YAML + "      url: http://127.0.0.1:9\n      grading_mdoe: x\n",
        "j:\n  resources_servers:\n    my_judge:\n      url: http://127.0.0.1:9\n      anything: 1\n",
    ],
)
def test_url_blocks_are_not_checked(tmp_path: Path, yaml: str) -> None:
    load(tmp_path, yaml, [])


def test_a_pasted_key_keeps_the_models_own_message() -> None:
    with pytest.raises(ConfigError) as caught:
        validate_builtin_block(ServerBlock("judge", "equivalence_judge", {"api_key": "k"}))
    assert caught.value.key == JUDGE_BLOCK
    assert "`api_key` is not read from the config" in str(caught.value) and "did you mean" not in str(caught.value)


def test_a_type_that_is_not_built_in_gets_no_field_check() -> None:
    # NeMo Gym's own servers validate their own fields when they start: ours is not the list to hold them to.
    with pytest.raises(ConfigError) as caught:
        validate_builtin_block(ServerBlock("j", "my_judge", {"grading_mdoe": "x"}))
    assert caught.value.key == "j.resources_servers.my_judge"  # the block's type, not its field
    assert "is not a field" not in str(caught.value)


@pytest.mark.parametrize(
    "overrides",
    [
        # One segment: a top-level knob, ours or NeMo Gym's.
        ["++force=true", "++merge_shards=false", "++nemo_gym_root=/x", "++count_missing_rollouts_as_zero=true"],
        ["+extra=1", "skip_venv_if_present=true"],
        # NeMo Gym's mapping knobs.
        ["++head_server.port=8000", "++telemetry.enabled=false"],
        # Into declared blocks, at any depth.
        [f"++{MCQA_BLOCK}.grading_mode=lenient_boxed", f"++{JUDGE_BLOCK}.judge_model=gpt-4.1-mini"],
        [f"++{JUDGE_BLOCK}.judge_prompt_template='{{question}} {{expected_answer}} {{generated_answer}}'"],
        [f"++{MCQA_BLOCK}.replicas=2", f"++{MCQA_BLOCK}.startup_timeout_s=60"],
        ["++a_mcqa.responses_api_agents.simple_agent.resources_server.name=mcqa"],
        [f"++{MCQA_BLOCK}={{grading_mode: lenient_boxed}}"],
    ],
)
def test_valid_overrides_pass(tmp_path: Path, overrides: list[str]) -> None:
    load(tmp_path, BOTH, overrides)


def test_an_override_below_an_interpolated_block_is_not_second_guessed(tmp_path: Path) -> None:
    yaml = MCQA_CONFIG.read_text() + "base:\n  resources_servers: {mcqa: {}}\nalias: ${base}\n"
    (tmp_path / "c.yaml").write_text(yaml)
    assert load_config([tmp_path / "c.yaml"], ["++alias.resources_servers.mcqa.grading_mode=x"]).values["alias"]


def test_an_override_value_that_is_not_yaml_is_a_usage_error(tmp_path: Path) -> None:
    # Unquoted, `{question} ...` starts a YAML mapping it does not finish.
    with pytest.raises(UsageError):
        load(tmp_path, BOTH, [f"++{JUDGE_BLOCK}.judge_prompt_template={{question}} {{expected_answer}}"])
