"""The servers a command starts ahead (``prestarted_servers``), lent to the fleets of its run that ask for the very
same block, and stopped with the pool."""

from __future__ import annotations

import select
import time
from pathlib import Path

import pytest

from reverify_assets.config.topology import ServerBlock
from reverify_assets.verifier.launcher import ServerFleet, prestarted_servers

MCQA = ServerBlock("mcqa", "mcqa", {"grading_mode": "lenient_boxed"})


def test_fleets_given_the_pool_borrow_its_server_one_after_another() -> None:
    with prestarted_servers([MCQA], judge_cache=None) as pool:
        prestarted = pool.idle[0].process
        with ServerFleet([MCQA], prestarted=pool, judge_cache=None) as urls:
            assert pool.idle == []
            assert set(urls) == {"mcqa"}
            assert prestarted.poll() is None
        assert pool.idle[0].process is prestarted  # given back, still serving
        with ServerFleet([MCQA], prestarted=pool, judge_cache=None) as again:
            assert again == urls
        assert prestarted.poll() is None
    assert pool.idle == []
    assert prestarted.poll() is not None  # stopped with the pool


def test_a_fleet_without_the_pool_starts_its_own_server() -> None:
    with prestarted_servers([MCQA], judge_cache=None) as pool:
        prestarted = pool.idle[0].process
        with ServerFleet(
            [MCQA], judge_cache=None
        ) as urls:  # a run the command did not make: nothing was started for it
            assert pool.idle[0].process is prestarted
            assert set(urls) == {"mcqa"}
    assert prestarted.poll() is not None


@pytest.mark.parametrize(
    ("wanted", "judge_cache"),
    [
        (ServerBlock("mcqa", "mcqa", {"grading_mode": "strict_single_letter_boxed"}), None),
        (MCQA, Path("/elsewhere/judge_cache.sqlite")),  # a server started without the cache cannot serve with it
    ],
)
def test_a_fleet_for_another_server_starts_its_own_and_the_unclaimed_one_is_stopped(
    wanted: ServerBlock, judge_cache: Path | None
) -> None:
    with prestarted_servers([MCQA], judge_cache=None) as pool:
        prestarted = pool.idle[0].process
        with ServerFleet([wanted], prestarted=pool, judge_cache=judge_cache):
            assert pool.idle[0].process is prestarted
    assert pool.idle == []
    assert prestarted.poll() is not None


def test_prestarting_skips_servers_given_by_url() -> None:
    with prestarted_servers([ServerBlock("remote", "mcqa", {"url": "http://127.0.0.1:9"})], judge_cache=None) as pool:
        assert pool.idle == []


def test_a_prestarted_server_is_not_timed_out_by_the_callers_own_start_up() -> None:
    """Its limit counts from when a fleet begins to wait: here 10 ms, and the server answered long before."""
    hasty = ServerBlock("mcqa", "mcqa", {"grading_mode": "lenient_boxed", "startup_timeout_s": 0.01})
    with prestarted_servers([hasty], judge_cache=None) as pool:
        child = pool.idle[0]
        assert child.process.stdout is not None
        deadline = time.monotonic() + 120
        while not select.select([child.process.stdout], [], [], 0.1)[0]:  # its ready line is waiting
            assert time.monotonic() < deadline, "the server did not start"
        with ServerFleet([hasty], prestarted=pool, judge_cache=None) as urls:
            assert set(urls) == {"mcqa"}
