"""Config files, overrides and routing of rows to resources servers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from reverify_assets.config.fingerprint import verifier_config_hash
from reverify_assets.config.loading import load_config
from reverify_assets.config.topology import read_topology
from reverify_assets.errors import ConfigError, ServerError, UsageError
from reverify_assets.run.preparation import load_verifier_setup
from reverify_assets.run.reverify_guard import enforce_guard

MCQA = {"mcqa": {"resources_servers": {"mcqa": {"entrypoint": "app.py", "grading_mode": None, "domain": "knowledge"}}}}
TWO_SERVERS_WITH_AGENTS = {
    "rs_a": {"resources_servers": {"mcqa": {}}},
    "rs_b": {"resources_servers": {"mcqa": {"url": "http://127.0.0.1:9"}}},
    "agent_a": {
        "responses_api_agents": {"simple_agent": {"resources_server": {"type": "resources_servers", "name": "rs_a"}}}
    },
    "agent_b": {"responses_api_agents": {"simple_agent": {"resources_server": {"name": "rs_b"}}}},
    "env_b": {"environment_servers": {"legacy_agent": {"agent_server": {"name": "agent_b"}}}},
}


def write_yaml(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_configs_merge_in_order_and_overrides_win(tmp_path: Path) -> None:
    first = write_yaml(tmp_path, "a.yaml", "mcqa:\n  resources_servers:\n    mcqa:\n      grading_mode: null\n")
    second = write_yaml(tmp_path, "b.yaml", "mcqa:\n  resources_servers:\n    mcqa:\n      domain: x\n")
    config = load_config(
        [first, second], ["++mcqa.resources_servers.mcqa.grading_mode=lenient_boxed", "+extra=1"]
    ).values
    assert config["mcqa"]["resources_servers"]["mcqa"] == {"grading_mode": "lenient_boxed", "domain": "x"}
    assert config["extra"] == 1


@pytest.mark.parametrize("override", ["++=x", "++novalue", "++a..b=1"])
def test_bad_override_is_a_usage_error(tmp_path: Path, override: str) -> None:
    path = write_yaml(tmp_path, "a.yaml", "a: 1\n")
    with pytest.raises(UsageError):
        load_config([path], [override])


@pytest.mark.parametrize(
    "text",
    [None, "a: [1, 2\n", "- 1\n- 2\n"],
    ids=["not found", "not valid YAML", "not a mapping"],
)
def test_config_file_errors_name_the_file(tmp_path: Path, text: str | None) -> None:
    path = tmp_path / "missing.yaml" if text is None else write_yaml(tmp_path, "bad.yaml", text)
    with pytest.raises(ConfigError) as caught:
        load_config([path])
    assert (caught.value.key, caught.value.source) == (None, str(path))


def test_a_mapping_knob_of_one_key_is_not_a_server_block() -> None:
    # NeMo Gym's responses_api_agents/vibench_agent/configs/docker.yaml
    knob = {"sandbox": {"default_metadata": {"sandbox-api": "docker"}}}
    assert read_topology({**MCQA, **knob}).servers.keys() == {"mcqa"}


def test_single_server_and_no_agents_takes_every_row() -> None:
    topology = read_topology(MCQA)
    assert topology.server_for({"agent_ref": {"name": "anything"}}) == "mcqa"
    assert topology.server_for({}) == "mcqa"


@pytest.mark.parametrize(
    ("row", "server"),
    [
        ({"agent_ref": {"name": "agent_a"}}, "rs_a"),
        ({"agent_ref": {"name": "agent_b"}}, "rs_b"),
        ({"agent_ref": {"name": "agent_a"}, "task_source": "rs_b"}, "rs_b"),
        ({"agent_ref": {"name": "nobody"}, "_ng_environment_server": "env_b"}, "rs_b"),
    ],
)
def test_routing_by_agent_blocks(row: dict[str, Any], server: str) -> None:
    assert read_topology(TWO_SERVERS_WITH_AGENTS).server_for(row) == server


def test_unroutable_row_names_the_agent() -> None:
    with pytest.raises(ConfigError) as caught:
        read_topology(TWO_SERVERS_WITH_AGENTS).server_for({"agent_ref": {"name": "nobody"}})
    # No field names the row's agent: the message does, with the agents it could have been.
    assert "agent_ref.name='nobody'" in str(caught.value)
    assert "Known agents: ['agent_a', 'agent_b']" in str(caught.value)


@pytest.mark.parametrize(
    ("config", "key"),
    [
        ({"x": 1}, None),  # declares no resources server
        ({"a": {"resources_servers": {"mcqa": {}}}, "b": {"resources_servers": {"mcqa": {}}}}, None),  # no agents
        (
            {**MCQA, "ag": {"responses_api_agents": {"s": {"resources_server": {"name": "gone"}}}}},
            "ag.responses_api_agents.s.resources_server.name",
        ),
        ({**MCQA, "ag": {"responses_api_agents": {"s": "x"}}}, "ag.responses_api_agents.s"),
    ],
    ids=["no resources server", "no agent blocks", "an undeclared server", "not a mapping"],
)
def test_topology_errors(config: dict[str, Any], key: str | None) -> None:
    with pytest.raises(ConfigError) as caught:
        read_topology(config)
    assert (caught.value.key, caught.value.source) == (key, None)


@pytest.mark.parametrize(
    ("yaml", "key"),
    [
        (
            "mcqa:\n  resources_servers:\n    mcqa:\n      grading_mode: fuzzy\n",
            "mcqa.resources_servers.mcqa.grading_mode",
        ),
    ],
)
def test_builtin_block_errors_name_instance_and_field(tmp_path: Path, yaml: str, key: str) -> None:
    path = write_yaml(tmp_path, "c.yaml", yaml)
    with pytest.raises(ConfigError) as caught:
        load_verifier_setup([path], [])
    assert (caught.value.key, caught.value.source) == (key, str(path))


def test_url_blocks_of_any_type_are_accepted(tmp_path: Path) -> None:
    path = write_yaml(tmp_path, "c.yaml", "j:\n  resources_servers:\n    my_judge:\n      url: http://127.0.0.1:1/\n")
    assert load_verifier_setup([path], []).topology.servers["j"].url == "http://127.0.0.1:1"


def test_config_hash_ignores_placement_but_not_grading() -> None:
    base = read_topology(MCQA).servers.values()
    moved = read_topology(
        {"mcqa": {"resources_servers": {"mcqa": {**MCQA["mcqa"]["resources_servers"]["mcqa"], "port": 9999}}}}
    ).servers.values()
    regraded = read_topology({"mcqa": {"resources_servers": {"mcqa": {"grading_mode": "lenient_boxed"}}}})
    assert verifier_config_hash(base) == verifier_config_hash(moved)
    assert verifier_config_hash(base) != verifier_config_hash(regraded.servers.values())


@pytest.mark.parametrize(
    ("modes", "force", "outcome"),
    [
        ({"a": "stateless"}, False, False),
        ({"a": "stateless", "b": "unknown"}, True, True),
        ({"a": "unsupported"}, False, "raise"),
    ],
)
def test_reverify_mode_guard(modes: dict[str, str], force: bool, outcome: object) -> None:
    if outcome == "raise":
        with pytest.raises(ServerError) as caught:
            enforce_guard(modes, force=force)
        assert caught.value.server == "a"
    else:
        assert enforce_guard(modes, force=force) is outcome


@pytest.mark.parametrize(
    ("token", "is_one"),
    [
        ("++a.b=c", True),
        ("+x=1", True),
        ("merge_shards=false", True),
        ("a.b-c.d=1", True),
        ("exp/lr=0.1/out.jsonl", False),
        ("--output=x.jsonl", False),
        ("/abs/p=q", False),
        ("run", False),
    ],
)
def test_what_counts_as_an_override(token: str, is_one: bool) -> None:
    from reverify_assets.config.loading import is_override

    assert is_override(token) is is_one
