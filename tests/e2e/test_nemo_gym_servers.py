"""``reverify run`` starting NeMo Gym's own resources servers from their shipped configs, as a NeMo Gym user would.

Each bundled server's example data against what NeMo Gym's ``gym eval reverify`` wrote for it
(tests/data/nemo_gym_servers, from shared/conformance): every row byte for byte, once our ``reverify_provenance``
is taken out, and every section of the metrics file. Then what a user sees when a server does not start, and
that no server outlives the command, however it ends.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import urllib.request
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path

import pytest

from reverify_assets.gym.installation import PYTHON_KEY, RESOURCES_SERVERS, find_installation
from reverify_assets.rows.payload import build_verify_payload
from reverify_assets.verifier.client import _verify_line as verify_line
from tests.support.cli import (
    CLI_LIMIT_S,
    CONFORMANCE,
    CONFORMANCE_INPUTS,
    CONFORMANCE_ROLLOUTS,
    REVERIFY,
    read_jsonl,
    row_key,
    run_args,
)
from tests.support.nemo_gym import SERVERS_DATA, gym_env, nemo_gym_python, processes_in
from tests.support.process_tree import run_reaped

pytestmark = pytest.mark.slow
SERVERS = sorted(path.name for path in SERVERS_DATA.iterdir() if path.is_dir())
# The servers NeMo Gym itself re-verifies only under --force (they do not declare themselves stateless).
NEEDS_FORCE = {name for name in SERVERS if any((SERVERS_DATA / name / "expected").glob("unsafe_*"))}
# Those whose app.py overrides NeMo Gym's compute_metrics and get_key_metrics.
OWN_HOOKS = {"assaybench", "bunsenbench_chemistry_mcq", "mcqa", "polymath"}


@pytest.fixture(scope="module")
def python() -> Path:
    return nemo_gym_python()


def server_folder(python: Path, name: str) -> Path:
    return find_installation({PYTHON_KEY: str(python)}).root / RESOURCES_SERVERS / name


def gym_run(
    tmp_path: Path, python: Path, name: str, *flags: str, output: Path | None = None
) -> subprocess.CompletedProcess[str]:
    data = SERVERS_DATA / name
    output = output or tmp_path / "out" / "out.jsonl"
    args = run_args(
        data / "config.yaml", data / "rollouts_materialized_inputs.jsonl", data / "rollouts.jsonl", output, *flags
    )
    return subprocess.run(
        [REVERIFY, *map(str, args)],
        capture_output=True,
        text=True,
        env=gym_env(tmp_path / "home", python),
        timeout=CLI_LIMIT_S,
    )


def without_provenance(path: Path) -> list[str]:
    rows = []
    for line in path.read_text().splitlines():
        row = json.loads(line)
        row.pop("reverify_provenance")
        rows.append(json.dumps(row))
    return rows


@pytest.mark.parametrize("name", SERVERS)
def test_a_nemo_gym_server_started_from_its_config_gives_nemo_gyms_results(
    tmp_path: Path, python: Path, name: str
) -> None:
    flags = ["--force"] if name in NEEDS_FORCE else []
    if name == "mcqa":  # the built-in mcqa is the default for its type
        flags.append("++mcqa.resources_servers.mcqa.implementation=nemo_gym")
    done = gym_run(tmp_path, python, name, *flags)
    assert done.returncode == 0, done.stderr
    assert f"starting NeMo Gym's {name} server" in done.stderr
    # Every row by the route our bootstrap adds to the server's own app, with /verify's replies.
    assert f"Requests: {name} by /verify_batch, 16 rows a request" in done.stdout, done.stdout
    # NeMo Gym's metrics maths done here; only the hooks a server has of its own are asked of it.
    how = "compute_metrics and get_key_metrics by the server" if name in OWN_HOOKS else "its hooks NeMo Gym's defaults"
    assert f"Metrics computed: {name} here, {how}" in done.stdout, done.stdout
    expected = SERVERS_DATA / name / "expected"
    stem = "unsafe_out" if name in NEEDS_FORCE else "out"
    output = tmp_path / "out" / f"{stem}.jsonl"
    # NeMo Gym writes rows as they complete; the expected files are sorted by key, as we write ours.
    assert without_provenance(output) == [json.dumps(json.loads(line)) for line in (expected / f"{stem}.jsonl").open()]
    theirs = json.loads((expected / f"{stem}_aggregate_metrics.json").read_text())
    ours = json.loads((tmp_path / "out" / f"{stem}_aggregate_metrics.json").read_text())
    assert len(ours) == len(theirs) == 1
    for section, value in theirs[0].items():
        assert ours[0][section] == value, section
    assert (tmp_path / "out" / f"{stem}_failures.jsonl").read_text() == ""
    assert processes_in(server_folder(python, name)) == []


@pytest.mark.parametrize("name", SERVERS)
def test_the_nemo_gym_users_own_command_from_their_nemo_gym_folder(tmp_path: Path, python: Path, name: str) -> None:
    """The server's shipped `configs/<name>.yaml` (its agent and environment blocks too), run from the folder
    holding `resources_servers/` with NeMo Gym's `gym` on PATH, as a NeMo Gym user has it: nothing configured."""
    data = SERVERS_DATA / name
    root = server_folder(python, name).parents[1]
    output = tmp_path / "out.jsonl"
    flags = ["--force"] if name in NEEDS_FORCE else []
    if name == "mcqa":
        flags.append("++mcqa.resources_servers.mcqa.implementation=nemo_gym")
    config = Path(RESOURCES_SERVERS) / name / "configs" / f"{name}.yaml"
    args = run_args(config, data / "rollouts_materialized_inputs.jsonl", data / "rollouts.jsonl", output, *flags)
    env = {key: value for key, value in os.environ.items() if not key.startswith("REVERIFY_NEMO_GYM")}
    env.update(DAGSTER_HOME=str(tmp_path / "home"), PATH=f"{python.parent}:/usr/bin:/bin")
    done = subprocess.run(
        [REVERIFY, *map(str, args)], capture_output=True, text=True, env=env, cwd=root, timeout=CLI_LIMIT_S
    )
    assert done.returncode == 0, done.stderr
    stem = "unsafe_out" if name in NEEDS_FORCE else "out"
    expected = SERVERS_DATA / name / "expected"
    rewards = [row["reward"] for row in read_jsonl(tmp_path / f"{stem}.jsonl")]
    assert rewards == [row["reward"] for row in read_jsonl(expected / f"{stem}.jsonl")]
    [theirs] = json.loads((expected / f"{stem}_aggregate_metrics.json").read_text())
    [ours] = json.loads((tmp_path / f"{stem}_aggregate_metrics.json").read_text())
    assert {section: ours[section] for section in theirs} == theirs


def test_a_server_whose_verify_needs_the_http_request_gets_one_verify_a_row(tmp_path: Path, python: Path) -> None:
    """NeMo Gym's example_session_state_mgmt reads the session of the request its ``verify`` takes: no batch route
    for it, and its rows settle as one ``/verify`` each gives them (here a failure: reverification seeds no
    session), none lost."""
    name = "example_session_state_mgmt"
    folder = server_folder(python, name)
    agent = {"type": "responses_api_agents", "name": f"{name}_simple_agent"}
    inputs, rollouts = tmp_path / "rollouts_materialized_inputs.jsonl", tmp_path / "rollouts.jsonl"
    tasks = [json.loads(line) for line in (folder / "data" / "example.jsonl").open()]
    answers = [json.loads(line) for line in (folder / "data" / "example_rollouts.jsonl").open()]
    keys = [{"_ng_task_index": n, "_ng_rollout_index": 0, "agent_ref": agent} for n in range(len(answers))]
    inputs.write_text("".join(json.dumps(task | key) + "\n" for task, key in zip(tasks, keys, strict=False)))
    rollouts.write_text("".join(json.dumps(answer | key) + "\n" for answer, key in zip(answers, keys, strict=True)))
    output = tmp_path / "out" / "out.jsonl"
    config = folder / "configs" / f"{name}.yaml"
    # Paired by position: the server's shipped example rollouts are of other tasks than its example rows ("add 13
    # then add 14" against "add 1 then add 2"), which the join's identity check would refuse.
    done = run_reaped(
        [REVERIFY, *map(str, run_args(config, inputs, rollouts, output, "--force", "--allow-prompt-mismatch"))],
        env=gym_env(tmp_path / "home", python),
        timeout=CLI_LIMIT_S,
    )
    assert done.returncode == 0, done.stderr
    assert f"Requests: {name}_resources_server by /verify, one request a row" in done.stdout, done.stdout
    written = output.with_name("unsafe_out.jsonl")
    scored = [*read_jsonl(written), *read_jsonl(written.with_name("unsafe_out_failures.jsonl"))]
    assert sorted(row_key(row) for row in scored) == [(n, 0) for n in range(min(len(tasks), len(answers)))]


def test_a_server_that_is_not_stateless_needs_force(tmp_path: Path, python: Path) -> None:
    done = gym_run(tmp_path, python, "circle_count")
    assert done.returncode == 1
    assert "--force" in done.stderr
    assert not (tmp_path / "out" / "out.jsonl").exists()
    assert processes_in(server_folder(python, "circle_count")) == []


def test_the_servers_own_config_error_is_shown_as_it_printed_it(tmp_path: Path, python: Path) -> None:
    done = gym_run(
        tmp_path,
        python,
        "mcqa",
        "++mcqa.resources_servers.mcqa.implementation=nemo_gym",
        "++mcqa.resources_servers.mcqa.grading_mode=no_such_mode",
    )
    assert done.returncode == 1
    assert "exited with code" in done.stderr and "before it answered" in done.stderr
    # pydantic's own words, from the server's log
    assert "grading_mode" in done.stderr and "Input should be" in done.stderr
    assert "Traceback (most recent call last)" not in done.stderr.split("The last lines of its log")[0]


def test_an_unknown_server_type_names_the_closest_nemo_gym_server(tmp_path: Path, python: Path) -> None:
    config = tmp_path / "typo.yaml"
    config.write_text("x:\n  resources_servers:\n    circle_cuont:\n      entrypoint: app.py\n")
    data = SERVERS_DATA / "circle_count"
    args = run_args(config, data / "rollouts_materialized_inputs.jsonl", data / "rollouts.jsonl", tmp_path / "o.jsonl")
    done = run_reaped([REVERIFY, *map(str, args)], env=gym_env(tmp_path, python), timeout=CLI_LIMIT_S)
    assert done.returncode == 1
    assert "did you mean `circle_count`?" in done.stderr
    assert not (tmp_path / "o.jsonl").exists()


def test_without_nemo_gym_it_says_where_it_looked(tmp_path: Path) -> None:
    data = SERVERS_DATA / "circle_count"
    args = run_args(
        data / "config.yaml", data / "rollouts_materialized_inputs.jsonl", data / "rollouts.jsonl", tmp_path / "o.jsonl"
    )
    env = {name: value for name, value in os.environ.items() if not name.startswith("REVERIFY_NEMO_GYM")}
    env.update(DAGSTER_HOME=str(tmp_path / "home"), PATH="/usr/bin:/bin")
    done = run_reaped([REVERIFY, *map(str, args)], env=env, cwd=tmp_path, timeout=CLI_LIMIT_S)
    assert done.returncode == 1
    assert "cannot find a Python that has nemo_gym" in done.stderr
    assert "`gym` on PATH: not found" in done.stderr
    assert str(tmp_path / ".venv" / "bin" / "python") in done.stderr
    assert "REVERIFY_NEMO_GYM_PYTHON" in done.stderr and "nemo_gym_python" in done.stderr
    assert not (tmp_path / "o.jsonl").exists()


def wait_until(condition: Callable[[], object], limit: float, what: str) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {limit:.0f} s waiting until {what}")


@pytest.mark.parametrize("how", ["SIGKILL", "SIGTERM", "SIGINT to the group"])
def test_the_server_is_stopped_however_the_command_ends(tmp_path: Path, python: Path, how: str) -> None:
    name = "circle_count"
    folder = server_folder(python, name)
    data = SERVERS_DATA / name
    args = run_args(
        data / "config.yaml",
        data / "rollouts_materialized_inputs.jsonl",
        data / "rollouts.jsonl",
        tmp_path / "o.jsonl",
        "--force",
    )
    cli = subprocess.Popen(
        [REVERIFY, *map(str, args)],
        env=gym_env(tmp_path / "home", python),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # a group of its own, as a shell gives a foreground job
    )
    try:
        wait_until(lambda: processes_in(folder), 120, "the server started")
        if how == "SIGKILL":
            cli.kill()
        elif how == "SIGTERM":
            cli.terminate()
        else:
            os.killpg(cli.pid, signal.SIGINT)
        cli.wait(timeout=120)
        wait_until(lambda: not processes_in(folder), 60, "the server stopped")
    finally:
        for kill, target in [(os.killpg, cli.pid), *((os.kill, pid) for pid in processes_in(folder))]:
            try:
                kill(target, signal.SIGKILL)
            except ProcessLookupError:
                pass
        cli.wait()


def post(url: str, body: bytes) -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=CLI_LIMIT_S) as reply:
            return reply.status, reply.read()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read()


def assert_a_batch_answers_as_verify_does(url: str) -> None:
    """NeMo Gym's mcqa: every row of one /verify_batch has the status and the bytes its own /verify has, a row
    whose verify raises (a regex in its template that is not text) and a row its request model refuses among them."""
    inputs = {row_key(row): row for row in read_jsonl(CONFORMANCE_INPUTS)}
    bodies = [
        json.dumps(build_verify_payload(inputs[row_key(row)], row, row_key(row))).encode()
        for row in read_jsonl(CONFORMANCE_ROLLOUTS)[:20]
    ]
    raising = json.loads(bodies[0]) | {"template_metadata": {"output_regex": [123]}}  # re.findall raises
    bodies[5:5] = [json.dumps(raising).encode(), b'{"responses_create_params": 3}']
    one_a_row = [post(f"{url}/verify", body) for body in bodies]
    status, batch = post(f"{url}/verify_batch", b"\n".join(bodies))
    assert status == 200
    # Read as the client reads it: each row's status and the bytes of its reply, as they came.
    assert [verify_line(line) for line in batch.splitlines()] == one_a_row
    assert [status for status, _ in one_a_row][5:7] == [500, 422] and b"TypeError(" in one_a_row[5][1]


def test_serve_hosts_copies_of_a_nemo_gym_server_behind_one_address(tmp_path: Path, python: Path) -> None:
    """`reverify serve` for rescorings that reach the server by url: two copies of NeMo Gym's mcqa, one address."""
    folder = server_folder(python, "mcqa")
    log = tmp_path / "serve.log"
    overrides = ["++mcqa.resources_servers.mcqa.implementation=nemo_gym", "++mcqa.resources_servers.mcqa.replicas=2"]
    with log.open("wb") as sink:
        serve = subprocess.Popen(
            [REVERIFY, "serve", "--config", str(SERVERS_DATA / "mcqa" / "config.yaml"), *overrides],
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=gym_env(tmp_path / "home", python),
            start_new_session=True,
        )
    try:
        wait_until(lambda: "joined" in log.read_text() or serve.poll() is not None, 300, "the second copy joined")
        announced = re.search(r"mcqa \(mcqa\) listening on (http://127\.0\.0\.1:\d+) \(2 copies\)", log.read_text())
        assert announced, log.read_text()
        url = announced.group(1)
        config = tmp_path / "remote.yaml"
        config.write_text(f"mcqa:\n  resources_servers:\n    mcqa:\n      url: {url}\n")
        output = tmp_path / "out.jsonl"
        done = subprocess.run(
            [REVERIFY, *map(str, run_args(config, CONFORMANCE_INPUTS, CONFORMANCE_ROLLOUTS, output))],
            capture_output=True,
            text=True,
            env=gym_env(tmp_path / "home", python),
            timeout=CLI_LIMIT_S,
        )
        assert done.returncode == 0, done.stderr
        expected = {
            row_key(row): row["row_default"]["reward"] for row in read_jsonl(CONFORMANCE / "expected_by_mode.jsonl")
        }
        assert {row_key(row): row["reward"] for row in read_jsonl(output)} == expected
        assert "Requests: mcqa by /verify_batch, 16 rows a request" in done.stdout, "served by copies at a url:"
        with urllib.request.urlopen(f"{url}/_replicas", timeout=30) as reply:
            copies = json.loads(reply.read())
        assert len(copies) == 2 and all(copy["served"] > 0 for copy in copies), copies
        assert_a_batch_answers_as_verify_does(url)
        os.killpg(serve.pid, signal.SIGINT)
        assert serve.wait(timeout=120) == 0, log.read_text()
        assert "servers stopped" in log.read_text()
        wait_until(lambda: not processes_in(folder), 60, "both copies stopped")
    finally:
        with suppress(ProcessLookupError):
            os.killpg(serve.pid, signal.SIGKILL)
        serve.wait()


def test_a_probe_of_a_server_that_declares_nothing_then_a_forced_run_prints_it(tmp_path: Path, python: Path) -> None:
    """The case the probe is for: NeMo Gym's circle_count declares no reverify mode, so a rescore needs --force;
    the probe scores its rows twice on two NeMo Gym server processes and the forced run says what it found."""
    data = SERVERS_DATA / "circle_count"
    inputs, rollouts = data / "rollouts_materialized_inputs.jsonl", data / "rollouts.jsonl"
    args = ["probe", "--config", data / "config.yaml", "--inputs", inputs, "--rollouts", rollouts]
    env = gym_env(tmp_path / "home", python)
    probe = subprocess.run([REVERIFY, *map(str, args)], capture_output=True, text=True, env=env, timeout=CLI_LIMIT_S)
    assert probe.returncode == 0, probe.stderr
    rows = len(read_jsonl(rollouts))
    assert f"between the two passes: {rows} of {rows} rows agree" in probe.stdout
    assert "Verdict: CONSISTENT WITH STATELESS: two separately started servers" in probe.stdout
    assert probe.stderr.count("starting NeMo Gym's circle_count server") == 2, "one server process per pass"
    assert "WARNING" not in probe.stderr, "the probe is the evidence the guard lacks: it does not warn"
    assert processes_in(server_folder(python, "circle_count")) == []

    forced = gym_run(tmp_path, python, "circle_count", "--force")
    assert forced.returncode == 0, forced.stderr
    assert "reverify_mode=UNSUPPORTED or UNKNOWN" in forced.stderr
    assert "Verdict" not in forced.stderr and "CONSISTENT WITH STATELESS: two separately started" in forced.stderr
