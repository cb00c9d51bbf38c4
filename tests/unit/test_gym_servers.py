"""Finding NeMo Gym, the Python and config its servers get, and the guard that stops them with their parent."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from omegaconf import OmegaConf

from reverify_assets.config.implementations import BUILTIN_TYPES
from reverify_assets.config.topology import ServerBlock
from reverify_assets.errors import ConfigError, ServerError
from reverify_assets.gym import installation as installation_module
from reverify_assets.gym.installation import (
    PYTHON_ENV,
    ROOT_ENV,
    NemoGymInstallation,
    PythonProbe,
    find_installation,
)
from reverify_assets.gym.launch import SERVER_BOOTSTRAP, gym_server_command, server_folder
from reverify_assets.gym.server_config import gym_server_config
from reverify_assets.gym.server_python import added_requirements, server_python, server_requirements
from reverify_assets.processes.child_python import child_environment, module_command
from reverify_assets.run import preparation
from reverify_assets.run.preparation import load_verifier_setup
from reverify_assets.servers.registry import BUILTIN_SERVERS


@pytest.mark.parametrize(
    ("text", "added"),
    [
        ("-e nemo-gym[dev] @ ../../\n", []),
        ("-e nemo-gym[dev] @ ../../\ntiktoken\n", ["tiktoken"]),
        ("nemo_gym>=0.7\n# a comment\n\nmath-verify==0.8.0  # pinned\ndatasets\n", ["math-verify==0.8.0", "datasets"]),
        ("-e ../../other\nreasoning-gym>=0.1.19\n", ["reasoning-gym>=0.1.19"]),
        ("", []),
    ],
)
def test_what_a_servers_requirements_add_to_nemo_gym(text: str, added: list[str]) -> None:
    assert added_requirements(text) == added


@pytest.mark.parametrize(
    ("files", "added"),
    [
        ({"requirements.txt": "-e nemo-gym[dev] @ ../../\ntiktoken\n"}, ["tiktoken"]),
        (
            {"pyproject.toml": '[project]\nname = "x"\ndependencies = ["nemo-gym[dev]", "json-repair"]\n'},
            ["json-repair"],
        ),
        ({"pyproject.toml": '[project]\nname = "x"\n'}, []),
        ({}, []),
    ],
)
def test_a_server_names_its_requirements_as_nemo_gym_reads_them(
    tmp_path: Path, files: dict[str, str], added: list[str]
) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    assert server_requirements(tmp_path) == added


def test_a_broken_pyproject_is_an_error_naming_it(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[project\n")
    with pytest.raises(ServerError) as caught:
        server_requirements(tmp_path)
    assert caught.value.path == tmp_path / "pyproject.toml"


SERVER = {"mcqa": {"resources_servers": {"mcqa": {"entrypoint": "app.py", "grading_mode": None}}}}


@pytest.mark.parametrize(
    ("config", "ports", "expected"),
    [
        (
            SERVER,
            {"mcqa": 4001},
            {
                "mcqa": {
                    "resources_servers": {
                        "mcqa": {"entrypoint": "app.py", "grading_mode": None, "host": "127.0.0.1", "port": 4001}
                    }
                },
                "head_server": {"host": "127.0.0.1", "port": 0},
                "dry_run": False,
            },
        ),
        (  # our own settings and fields are not shown to NeMo Gym; its own top-level knobs are
            {
                "nemo_gym_root": "/x",
                "nemo_gym_python": "/y",
                "uvicorn_logging_show_200_ok": True,
                "dry_run": False,
                "mcqa": {"resources_servers": {"mcqa": {"implementation": "nemo_gym", "replicas": 2, "port": 1}}},
            },
            {"mcqa": 4001},
            {
                "uvicorn_logging_show_200_ok": True,
                "dry_run": False,
                "mcqa": {"resources_servers": {"mcqa": {"port": 4001, "host": "127.0.0.1"}}},
                "head_server": {"host": "127.0.0.1", "port": 0},
            },
        ),
        (  # a server reached by url is placed at its address, for the servers that call it
            {
                **SERVER,
                "judge_model": {"responses_api_models": {"openai_model": {"url": "http://127.0.0.1:8765/v1"}}},
                "head_server": {"host": "127.0.0.1", "port": 11000},
            },
            {"mcqa": 4001},
            {
                "mcqa": {
                    "resources_servers": {
                        "mcqa": {"entrypoint": "app.py", "grading_mode": None, "host": "127.0.0.1", "port": 4001}
                    }
                },
                "judge_model": {
                    "responses_api_models": {
                        "openai_model": {"url": "http://127.0.0.1:8765/v1", "host": "127.0.0.1", "port": 8765}
                    }
                },
                "head_server": {"host": "127.0.0.1", "port": 11000},
                "dry_run": False,
            },
        ),
    ],
)
def test_the_config_a_nemo_gym_server_is_given(
    config: dict[str, Any], ports: dict[str, int], expected: dict[str, Any]
) -> None:
    assert gym_server_config(config, ports) == expected


def fake_python(folder: Path, *, nemo_gym: bool = True, servers: list[Path] | None = None) -> Path:
    """An executable that answers the installation probe as a Python with (or without) nemo_gym would."""
    folder.mkdir(parents=True, exist_ok=True)
    answer = {
        "nemo_gym": "/site/nemo_gym/__init__.py" if nemo_gym else None,
        "resources_servers": [str(path) for path in servers or []],
        "site_packages": ["/site"],
        "version": "3.13",
    }
    python = folder / "python"
    python.write_text(f"#!/bin/sh\nprintf '%s\\n' '{json.dumps(answer)}'\n")  # a builtin: PATH may be empty
    python.chmod(0o755)
    return python


@pytest.fixture
def bare(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No NeMo Gym anywhere: no settings, no `gym` on PATH, run from an empty folder."""
    for name in (PYTHON_ENV, ROOT_ENV):
        monkeypatch.delenv(name, raising=False)
    empty_bin = tmp_path / "empty_bin"
    empty_bin.mkdir()
    monkeypatch.setenv("PATH", str(empty_bin))
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    return cwd


def servers_tree(root: Path) -> Path:
    (root / "resources_servers" / "mcqa").mkdir(parents=True)
    (root / "resources_servers" / "mcqa" / "app.py").write_text("")
    return root


def test_a_configured_python_finds_the_servers_it_imports(bare: Path, tmp_path: Path) -> None:
    root = servers_tree(tmp_path / "site")
    python = fake_python(tmp_path / "venv" / "bin", servers=[root / "resources_servers"])
    found = find_installation({"nemo_gym_python": str(python)}, cwd=bare)
    assert (found.python, found.root) == (python, root)


def test_the_environment_variables_point_to_python_and_root(
    bare: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = servers_tree(tmp_path / "checkout")
    python = fake_python(tmp_path / "venv" / "bin")
    monkeypatch.setenv(PYTHON_ENV, str(python))
    monkeypatch.setenv(ROOT_ENV, str(root))
    found = find_installation({}, cwd=bare)
    assert (found.python, found.root) == (python, root)


def test_the_gym_command_on_path_names_its_python(bare: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = servers_tree(tmp_path / "site")
    python = fake_python(tmp_path / "venv" / "bin", servers=[root / "resources_servers"])
    gym = tmp_path / "venv" / "bin" / "gym"
    gym.write_text(f"#!{python}\nimport sys\n")
    gym.chmod(0o755)
    monkeypatch.setenv("PATH", str(gym.parent))
    assert find_installation({}, cwd=bare).python == python


def test_a_nemo_gym_checkout_is_found_from_its_own_folder(bare: Path) -> None:
    servers_tree(bare)
    python = fake_python(bare / ".venv" / "bin")  # an editable install: the servers are not a package
    found = find_installation({}, cwd=bare)
    assert (found.python, found.root) == (python, bare.resolve())


def test_with_nothing_found_it_says_where_it_looked_and_how_to_point_to_it(bare: Path) -> None:
    with pytest.raises(ConfigError) as error:
        find_installation({}, cwd=bare)
    assert error.value.key == "nemo_gym_python"
    # Where it looked and how to point to it are the point: they are in words.
    message = str(error.value)
    assert "`gym` on PATH: not found" in message
    assert f"{bare / '.venv' / 'bin' / 'python'}: not there" in message
    assert "nemo_gym_python: /path/to/python" in message and "$REVERIFY_NEMO_GYM_PYTHON" in message


@pytest.mark.parametrize(
    ("setting", "key"),
    [
        ({"nemo_gym_python": "/no/such/python"}, "nemo_gym_python"),  # not an executable Python
        ("without nemo_gym", "nemo_gym_python"),
        ("root without servers", "nemo_gym_root"),
    ],
)
def test_a_wrong_setting_is_an_error_naming_it(
    bare: Path, tmp_path: Path, setting: dict[str, str] | str, key: str
) -> None:
    if setting == "without nemo_gym":
        setting = {"nemo_gym_python": str(fake_python(tmp_path / "plain", nemo_gym=False))}
    elif setting == "root without servers":
        setting = {"nemo_gym_python": str(fake_python(tmp_path / "venv")), "nemo_gym_root": str(tmp_path)}
    assert isinstance(setting, dict)
    with pytest.raises(ConfigError) as caught:
        find_installation(setting, cwd=bare)
    assert (caught.value.key, caught.value.source) == (key, None)


def an_installation(root: Path) -> NemoGymInstallation:
    probe = PythonProbe(has_nemo_gym=True, servers_folders=(), site_packages=(), version="3.13")
    return NemoGymInstallation(root, Path("/nemo/bin/python"), probe)


def test_an_unknown_type_names_the_closest_nemo_gym_server(tmp_path: Path) -> None:
    installation = an_installation(servers_tree(tmp_path))
    with pytest.raises(ConfigError) as caught:
        server_folder(ServerBlock("x", "mcqq", {}), installation)
    assert caught.value.key == "x.resources_servers.mcqq"
    assert "(did you mean `mcqa`?)" in str(caught.value)
    with pytest.raises(ConfigError) as caught:
        server_folder(ServerBlock("x", "mcqa", {"entrypoint": "main.py"}), installation)
    assert caught.value.key == "x.resources_servers.mcqa.entrypoint"


@pytest.mark.parametrize(
    ("requirements", "own_venv", "expected"),
    [
        ("-e nemo-gym[dev] @ ../../\n", False, "base"),
        (None, False, "base"),
        ("-e nemo-gym[dev] @ ../../\ntiktoken\n", True, "own"),
    ],
)
def test_which_python_runs_a_server(tmp_path: Path, requirements: str | None, own_venv: bool, expected: str) -> None:
    installation = an_installation(servers_tree(tmp_path))
    folder = tmp_path / "resources_servers" / "mcqa"
    if requirements is not None:
        (folder / "requirements.txt").write_text(requirements)
    if own_venv:
        (folder / ".venv" / "bin").mkdir(parents=True)
        (folder / ".venv" / "bin" / "python").write_text("")
    chosen = server_python(installation, folder, tmp_path / "cache")
    assert chosen == (installation.python if expected == "base" else folder / ".venv" / "bin" / "python")


def test_the_server_runs_its_entrypoint_from_its_folder_with_nemo_gyms_variables(tmp_path: Path) -> None:
    installation = an_installation(servers_tree(tmp_path))
    command = gym_server_command(
        ServerBlock("my_mcqa", "mcqa", {}), SERVER, installation, ports={"my_mcqa": 4001}, cache=tmp_path
    )
    # Through the bootstrap that adds /verify_batch, which the server's Python runs as a file.
    assert command.argv == ["/nemo/bin/python", str(SERVER_BOOTSTRAP), "app.py"]
    assert SERVER_BOOTSTRAP.is_file()
    assert command.cwd == tmp_path / "resources_servers" / "mcqa"
    assert command.url == "http://127.0.0.1:4001"
    assert command.env["NEMO_GYM_CONFIG_PATH"] == "my_mcqa"
    assert OmegaConf.create(command.env["NEMO_GYM_CONFIG_DICT"])["dry_run"] is False
    assert command.env["PYTHONPATH"].split(os.pathsep)[0] == str(command.cwd)


def test_script_interpreter() -> None:
    assert installation_module._script_interpreter(Path("/no/such/script")) is None


# The guard, with a stand-in server that records its pid and then runs until it is stopped.
SLEEPER = "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(600)"


def start_guard(tmp_path: Path, code: str = SLEEPER) -> tuple[subprocess.Popen[bytes], Path]:
    pid_file = tmp_path / "server.pid"
    guard = subprocess.Popen(
        module_command("reverify_assets.verifier.process_guard"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=child_environment(),
    )
    spec = {
        "argv": [sys.executable, "-c", code, str(pid_file)],
        "cwd": str(tmp_path),
        "env": dict(os.environ),
        "log": str(tmp_path / "server.log"),
    }
    assert guard.stdin is not None and guard.stdout is not None
    guard.stdin.write(orjson.dumps(spec) + b"\n")
    guard.stdin.flush()
    assert guard.stdout.readline().startswith(b"STARTED ")
    return guard, pid_file


def wait_for(condition: Callable[[], bool], limit: float = 60) -> None:
    deadline = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for our purpose: it runs nothing, and only its parent's wait removes it.
    return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"


@pytest.mark.parametrize("end", ["stdin closed", "guard SIGTERM", "guard SIGKILL"])
def test_the_server_does_not_outlive_its_guard(tmp_path: Path, end: str) -> None:
    guard, pid_file = start_guard(tmp_path)
    try:
        wait_for(lambda: pid_file.exists() and pid_file.read_text() != "")
        server = int(pid_file.read_text())
        assert alive(server)
        if end == "stdin closed":
            assert guard.stdin is not None
            guard.stdin.close()
        elif end == "guard SIGTERM":
            guard.terminate()
        else:
            guard.kill()
        guard.wait(timeout=60)
        wait_for(lambda: not alive(server))
    finally:
        guard.kill()
        guard.wait()
        if pid_file.exists() and pid_file.read_text():
            try:
                os.kill(int(pid_file.read_text()), signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_a_server_that_exits_ends_its_guard_with_its_code(tmp_path: Path) -> None:
    guard, _ = start_guard(tmp_path, "import sys; print('bad config'); sys.exit(3)")
    assert guard.wait(timeout=60) == 3
    assert (tmp_path / "server.log").read_text() == "bad config\n"


JUDGE_CONFIG = {
    "judge": {
        "resources_servers": {
            "equivalence_llm_judge": {"judge_model_server": {"type": "responses_api_models", "name": "policy_model"}}
        }
    },
    "policy_model": {
        "responses_api_models": {"openai_model": {"openai_base_url": "http://127.0.0.1:8765/v1", "openai_api_key": "k"}}
    },
}


def test_a_judge_names_its_model_server_block() -> None:
    block = ServerBlock(
        "judge", "equivalence_llm_judge", JUDGE_CONFIG["judge"]["resources_servers"]["equivalence_llm_judge"]
    )
    [model] = block.referenced_models(JUDGE_CONFIG)
    assert (model.instance, model.type, model.kind) == ("policy_model", "openai_model", "responses_api_models")
    assert model.named() == "`policy_model.responses_api_models.openai_model`"
    assert block.referenced_models({"judge": JUDGE_CONFIG["judge"]}) == []  # not declared: nothing to start
    assert block.undeclared_models(JUDGE_CONFIG) == []
    assert block.undeclared_models({"judge": JUDGE_CONFIG["judge"]}) == [("judge_model_server", "policy_model")]


def test_a_judge_whose_model_server_is_not_declared_is_warned_about_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """NeMo Gym refuses such a config; ours runs it (polymath's judge is off), and says up front what rows that
    ask the judge will do."""
    monkeypatch.setattr(preparation, "server_folder", lambda block, installation: tmp_path)
    monkeypatch.setattr(preparation, "find_installation", lambda config, **_: None)
    monkeypatch.setattr(preparation, "_SAID", set())
    for _ in range(2):
        config_hash_of({"judge": JUDGE_CONFIG["judge"]}, tmp_path)
    [warning] = [record.getMessage() for record in caplog.records if "names the model server" in record.getMessage()]
    assert "`judge.resources_servers.equivalence_llm_judge.judge_model_server`" in warning
    assert "'policy_model', which the config does not declare" in warning and "judge_failed" in warning


def config_hash_of(config: dict[str, Any], tmp_path: Path) -> str:
    path = tmp_path / "c.yaml"
    path.write_text(json.dumps(config))
    return load_verifier_setup([path], []).config_hash


@pytest.mark.parametrize(
    ("field", "value", "changes_the_hash"),
    [
        ("openai_base_url", "http://127.0.0.1:9999/v1", True),
        ("openai_model", "other", True),
        ("openai_api_key", "k2", False),
    ],
)
def test_the_judges_model_is_part_of_the_verifier_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, field: str, value: str, changes_the_hash: bool
) -> None:
    monkeypatch.setattr(preparation, "server_folder", lambda block, installation: tmp_path)
    monkeypatch.setattr(preparation, "find_installation", lambda config, **_: None)
    changed = json.loads(json.dumps(JUDGE_CONFIG))
    changed["policy_model"]["responses_api_models"]["openai_model"][field] = value
    assert (config_hash_of(JUDGE_CONFIG, tmp_path) != config_hash_of(changed, tmp_path)) is changes_the_hash


def test_the_launchers_list_of_built_in_types_is_the_registrys() -> None:
    assert BUILTIN_TYPES == set(BUILTIN_SERVERS)


def test_a_server_that_cannot_be_run_is_said_in_its_log(tmp_path: Path) -> None:
    guard = subprocess.Popen(
        module_command("reverify_assets.verifier.process_guard"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=child_environment(),
    )
    spec = {"argv": ["/no/such/python", "app.py"], "cwd": str(tmp_path), "env": {}, "log": str(tmp_path / "s.log")}
    assert guard.stdin is not None
    guard.stdin.write(orjson.dumps(spec) + b"\n")
    guard.stdin.flush()
    assert guard.wait(timeout=60) == 127
    assert "cannot run ['/no/such/python', 'app.py']" in (tmp_path / "s.log").read_text()
