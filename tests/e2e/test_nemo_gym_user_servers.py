"""NeMo Gym servers written as a NeMo Gym user writes one, in a NeMo Gym checkout of their own, under ``reverify run``.

Metrics: NeMo Gym's maths done by the CLI, the server's own hooks run by it. A server is NeMo Gym's mcqa with hooks
that use every freedom NeMo Gym gives them (``per_task_metrics``, a NaN, a ``compute_repeat_metrics``, a
``get_key_metrics`` that changes the agent metrics it is given) and masked rows. The oracle is the same server with
``aggregate_metrics`` overridden (to call NeMo Gym's own), which the CLI can only ask ``/aggregate_metrics``: both
metrics files must agree section by section.

A server that dies in the middle of a ``/verify_batch`` request: its rows are retried, then failed, and none is
lost.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from reverify_assets.gym.installation import ROOT_ENV
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
from tests.support.nemo_gym import gym_env, nemo_gym_python, processes_in
from tests.support.process_tree import run_reaped

pytestmark = pytest.mark.slow

# The hooks every probe server may have, in a module of the checkout: each server keeps some of them (the others are
# NeMo Gym's defaults again), and its "_by_route" twin answers /aggregate_metrics with code of its own, which calls
# NeMo Gym's: the CLI can only ask it that, and its answer is the oracle.
PROBE_HOOKS = """
    import math

    from nemo_gym.config_types import AggregateMetrics, AggregateMetricsRequest
    from nemo_gym.reward_profile import AggregateMetricsMixin
    from resources_servers.mcqa.app import MCQAResourcesServer, MCQAVerifyRequest, MCQAVerifyResponse

    HOOKS = ("compute_metrics", "compute_repeat_metrics", "get_key_metrics")


    class HooksProbe(MCQAResourcesServer):
        async def verify(self, body: MCQAVerifyRequest) -> MCQAVerifyResponse:
            response = await super().verify(body)
            response.mask_sample = response.extracted_answer == "D"
            return response

        def compute_metrics(self, tasks):
            metrics = super().compute_metrics(tasks)
            metrics["not_a_number"] = math.nan
            metrics["per_task_metrics"] = [
                {"_ng_task_index": task[0]["_ng_task_index"], "rollouts_seen": len(task)} for task in tasks
            ]
            return metrics

        def compute_repeat_metrics(self, tasks):
            rewards = [rollout["reward"] for task in tasks for rollout in task]
            return {"mean/reward": sum(rewards) / len(rewards) + 1, "tasks_in_repeat": len(tasks)}

        def get_key_metrics(self, agent_metrics):
            agent_metrics["added_by_get_key_metrics"] = len(agent_metrics)
            return {name: value for name, value in agent_metrics.items() if name.startswith("pass@1")}


    async def by_its_route(self, body: AggregateMetricsRequest) -> AggregateMetrics:
        return await MCQAResourcesServer.aggregate_metrics(self, body)


    def probe(hooks, by_route):
        methods = {name: getattr(AggregateMetricsMixin, name) for name in HOOKS if name not in hooks}
        if by_route:
            methods["aggregate_metrics"] = by_its_route
        return type("Probe", (HooksProbe,), methods)
    """
PROBE_APP = """
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from probe_hooks import probe  # noqa: E402

    if __name__ == "__main__":
        probe({hooks!r}, by_route={by_route!r}).run_webserver()
    """
PROBES = {
    "probe_repeat": ("compute_metrics", "compute_repeat_metrics"),
    "probe_keys": ("compute_metrics", "get_key_metrics"),
    "probe_all": ("compute_metrics", "compute_repeat_metrics", "get_key_metrics"),
}
SERVERS = {
    **{
        f"{name}{twin}": PROBE_APP.format(hooks=hooks, by_route=bool(twin))
        for name, hooks in PROBES.items()
        for twin in ("", "_by_route")
    },
    "dies_mid_batch": """
        import os
        from pathlib import Path

        from resources_servers.mcqa.app import MCQAResourcesServer, MCQAVerifyRequest, MCQAVerifyResponse

        DIED = Path(os.environ["DIES_MID_BATCH_MARKER"])  # once only: the run that resumes finds it alive
        calls = 0


        class DiesMidBatch(MCQAResourcesServer):
            async def verify(self, body: MCQAVerifyRequest) -> MCQAVerifyResponse:
                global calls
                calls += 1
                if calls == 40 and not DIED.exists():  # in the third batch of 16, the first two still unanswered
                    DIED.touch()
                    os._exit(1)
                return await super().verify(body)


        if __name__ == "__main__":
            DiesMidBatch.run_webserver()
        """,
    "hooks_probe_broken": """
        from resources_servers.mcqa.app import MCQAResourcesServer


        class BrokenHook(MCQAResourcesServer):
            def compute_metrics(self, tasks):
                raise ValueError("this hook is broken")


        if __name__ == "__main__":
            BrokenHook.run_webserver()
        """,
}


@pytest.fixture(scope="module")
def python() -> Path:
    return nemo_gym_python()


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A NeMo Gym checkout of the user's own: its servers, each with its config."""
    root = tmp_path_factory.mktemp("checkout")
    (root / "probe_hooks.py").write_text(textwrap.dedent(PROBE_HOOKS))
    for name, source in SERVERS.items():
        folder = root / "resources_servers" / name
        (folder / "configs").mkdir(parents=True)
        (folder / "app.py").write_text(textwrap.dedent(source))
        (folder / "configs" / f"{name}.yaml").write_text(
            f"{name}:\n  resources_servers:\n    {name}:\n      entrypoint: app.py\n      grading_mode: lenient_boxed\n"
        )
    return root


def run(tmp_path: Path, python: Path, checkout: Path, name: str, *flags: str) -> tuple[int, str, str, Path]:
    output = tmp_path / name / "out.jsonl"
    config = checkout / "resources_servers" / name / "configs" / f"{name}.yaml"
    env = {**gym_env(tmp_path / "home", python), ROOT_ENV: str(checkout)}
    done = run_reaped(
        [REVERIFY, *map(str, run_args(config, CONFORMANCE_INPUTS, CONFORMANCE_ROLLOUTS, output, *flags))],
        env={**env, "DIES_MID_BATCH_MARKER": str(tmp_path / "died")},
        timeout=CLI_LIMIT_S,
    )
    assert processes_in(config.parents[1]) == []
    return done.returncode, done.stdout, done.stderr, output.with_name("out_aggregate_metrics.json")


@pytest.mark.parametrize(
    ("name", "computed"),
    [
        ("probe_repeat", "here, compute_metrics and compute_repeat_metrics by the server"),
        ("probe_keys", "here, compute_metrics and get_key_metrics by the server"),
        # get_key_metrics would run after the repeat hooks, where NeMo Gym runs it before: its own route answers.
        ("probe_all", "by its /aggregate_metrics"),
    ],
)
def test_the_servers_hooks_with_our_maths_give_what_its_own_aggregate_metrics_gives(
    tmp_path: Path, python: Path, checkout: Path, name: str, computed: str
) -> None:
    code, stdout, stderr, metrics = run(tmp_path, python, checkout, name)
    assert code == 0, stderr
    assert f"Metrics computed: {name} {computed}" in stdout, stdout
    code, stdout, stderr, by_route = run(tmp_path, python, checkout, f"{name}_by_route")
    assert code == 0, stderr
    assert f"Metrics computed: {name}_by_route by its /aggregate_metrics" in stdout, stdout

    [ours], [theirs] = json.loads(metrics.read_text()), json.loads(by_route.read_text())
    sections = ["group_level_metrics", "agent_metrics", "key_metrics", "repeat_level_metrics"]
    for section in sections:
        assert ours[section] == theirs[section], section
    # The hooks took part, and masked rows were left out of the scores.
    agent, hooks = ours["agent_metrics"], PROBES[name]
    assert agent["coverage/masked_rollouts"] > 0
    assert agent["not_a_number"] is None
    assert all(entry["rollouts_seen"] > 0 for entry in ours["group_level_metrics"])
    assert len(ours["repeat_level_metrics"]) == 3
    if "compute_repeat_metrics" in hooks:
        assert all(entry["tasks_in_repeat"] > 0 for entry in ours["repeat_level_metrics"])
    if "get_key_metrics" in hooks:
        assert agent["added_by_get_key_metrics"] > 0
        assert ours["key_metrics"] and all(name.startswith(("pass@1", "coverage/")) for name in ours["key_metrics"])


def test_a_hook_that_raises_fails_the_metrics_and_keeps_the_rows(tmp_path: Path, python: Path, checkout: Path) -> None:
    code, _, stderr, metrics = run(tmp_path, python, checkout, "hooks_probe_broken")
    assert code != 0
    assert "resources server 'hooks_probe_broken' gave no aggregate metrics" in stderr, stderr
    assert "/reverify_metrics_compute: HTTP 500" in stderr and "this hook is broken" in stderr, stderr
    assert not metrics.exists()
    rows = metrics.with_name("out.jsonl").read_text().splitlines()
    assert len(rows) == 180


def test_a_server_that_dies_mid_batch_loses_no_row_and_the_run_resumes(
    tmp_path: Path, python: Path, checkout: Path
) -> None:
    code, _, stderr, metrics = run(tmp_path, python, checkout, "dies_mid_batch")
    # Rows in flight when it died were retried against a server that is gone, then failed. The run stops there when
    # the first rows to settle all failed so; else the rows left fail alike, and so does the metrics' request.
    assert code != 0
    assert "all failed to connect (verify_failed)" in stderr or "gave no aggregate metrics" in stderr, stderr
    output = metrics.with_name("out.jsonl")
    written, failed = read_jsonl(output), read_jsonl(output.with_name("out_failures.jsonl"))
    assert failed and {row["_ng_failure_class"] for row in failed} == {"verify_failed"}
    assert all("(after 4 attempts)" in json.dumps(row) for row in failed)
    keys = [row_key(row) for row in [*written, *failed]]
    assert len(keys) == len(set(keys)), "no row twice"
    assert not metrics.exists()

    code, _, stderr, metrics = run(tmp_path, python, checkout, "dies_mid_batch", "--resume")
    assert code == 0, stderr
    rewards = {row_key(row): row["reward"] for row in read_jsonl(output)}
    expected = {
        row_key(row): row["lenient_boxed"]["reward"] for row in read_jsonl(CONFORMANCE / "expected_by_mode.jsonl")
    }
    assert rewards == expected, "each row once, as NeMo Gym's mcqa grades it"
    assert json.loads(metrics.read_text())[0]["coverage"]["complete"] is True
