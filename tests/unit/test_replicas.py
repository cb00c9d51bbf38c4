"""How many copies of a server run, and which copy each request goes to."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest

from reverify_assets.config.fingerprint import verifier_config_hash
from reverify_assets.config.topology import ServerBlock
from reverify_assets.errors import ConfigError
from reverify_assets.rows.verifier_wire import RetryPolicy
from reverify_assets.run.replication import check_placement_fields, wanted_replicas
from reverify_assets.verifier.client import VerifierClient, VerifyOutcome
from reverify_assets.verifier.replicas import ReplicaSet


def block(**fields: Any) -> ServerBlock:
    return ServerBlock("mcqa", "mcqa", fields)


NEMO_GYMS = {"implementation": "nemo_gym"}


@pytest.mark.parametrize(
    ("fields", "mode", "force", "copies"),
    [
        (NEMO_GYMS, "stateless", False, 4),  # one per core
        ({}, "stateless", False, 1),  # a built-in server: one, unless told
        ({"replicas": 2}, "stateless", False, 2),
        ({"replicas": 3, **NEMO_GYMS}, "stateless", False, 3),
        ({"replicas": 1}, "stateless", False, 1),
        ({}, "unknown", True, 1),  # --force allows copies; it does not ask for them
        ({"replicas": 3}, "unknown", True, 3),
        ({"replicas": 3}, "unknown", False, 1),  # judge recovery of a server that may keep state
        ({"replicas": 3, "url": "http://127.0.0.1:9"}, "stateless", False, 1),  # not ours to start
    ],
)
def test_how_many_copies_run(fields: dict[str, Any], mode: str, force: bool, copies: int) -> None:
    assert wanted_replicas(block(**fields), mode, force=force, cores=4) == copies


@pytest.mark.parametrize(("rows", "copies"), [(100, 1), (49_999, 1), (50_000, 4), (None, 4)])
def test_copies_nobody_asked_for_start_only_for_runs_worth_it(rows: int | None, copies: int) -> None:
    assert wanted_replicas(block(**NEMO_GYMS), "stateless", force=False, rows=rows, cores=4) == copies
    assert wanted_replicas(block(**NEMO_GYMS, replicas=2), "stateless", force=False, rows=rows, cores=4) == 2


@pytest.mark.parametrize("value", [0, -1, 1.5, "2", True])
def test_a_bad_replicas_value_names_its_path(value: Any) -> None:
    with pytest.raises(ConfigError) as caught:
        check_placement_fields(block(replicas=value))
    assert (caught.value.key, caught.value.source) == ("mcqa.resources_servers.mcqa.replicas", None)  # built in code


@pytest.mark.parametrize("value", [0, -5, "abc", True])
def test_a_bad_startup_timeout_names_its_path(value: Any) -> None:
    with pytest.raises(ConfigError) as caught:
        check_placement_fields(block(startup_timeout_s=value))
    assert (caught.value.key, caught.value.source) == ("mcqa.resources_servers.mcqa.startup_timeout_s", None)


class SlowReplica(VerifierClient):
    """Answers after ``release`` is set, and remembers how many requests it holds at once."""

    def __init__(self, name: str, session: aiohttp.ClientSession, release: asyncio.Event) -> None:
        super().__init__(name, f"http://{name}", session, RetryPolicy())
        self.release = release
        self.served = 0

    async def verify(self, body: bytes) -> VerifyOutcome:
        self.served += 1
        await self.release.wait()
        return VerifyOutcome({"reward": 1.0, "by": self.name})


async def _spread(requests: int, late_joiner_after: int) -> list[int]:
    release = asyncio.Event()
    async with aiohttp.ClientSession() as session:
        first, second = SlowReplica("a", session, release), SlowReplica("b", session, release)
        replicas = ReplicaSet(first)
        sent = [asyncio.create_task(replicas.verify(b"{}")) for _ in range(late_joiner_after)]
        await asyncio.sleep(0)
        replicas.add(second)
        sent += [asyncio.create_task(replicas.verify(b"{}")) for _ in range(requests - late_joiner_after)]
        await asyncio.sleep(0)
        release.set()
        outcomes = await asyncio.gather(*sent)
    assert all(outcome.result is not None for outcome in outcomes)
    return [first.served, second.served]


def test_requests_go_to_the_copy_with_the_fewest_in_flight_and_a_late_copy_catches_up() -> None:
    # 6 held by the first copy before the second joins: the next 8 go 7 to the second, then alternate.
    assert asyncio.run(_spread(14, late_joiner_after=6)) == [7, 7]


def test_copies_are_placement_not_grading() -> None:
    assert verifier_config_hash([block(replicas=4, startup_timeout_s=60)]) == verifier_config_hash([block()])
