"""How many copies of each server a verify step runs, and adding them as they come up.

A server that says it is stateless (``/reverify_mode``) grades each request from the request and its config
alone, so copies of it give the same answers: one server process is otherwise the pace of a run (NeMo Gym's
servers spend milliseconds of CPU a row). Under ``--force`` the user vouches for any server. ``replicas: N`` in
a block sets the number; one of NeMo Gym's stateless servers gets one per core for a run of 50,000 rows or more
(``ROWS_WORTH_A_COPY``) unless told otherwise. A built-in
server gets one: it grades a row in tens of microseconds, the run's own process does as much work again, and a
second copy on 2 cores made 100,000 rows slower (13.4 s with one, 14.9-17.2 s with two). Copies a block asks for
start with the command (``launcher.prestarted_servers``); those nobody asked for start once the first has
answered, so they never delay the first request. Rows go to the copies as they join.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable

from reverify_assets.config.implementations import runs_builtin
from reverify_assets.config.topology import REPLICAS_FIELD, ServerBlock
from reverify_assets.errors import ConfigError, ReverifyError
from reverify_assets.verifier.launcher import STARTUP_TIMEOUT_FIELD, ServerFleet

log = logging.getLogger("reverify")
STATELESS = "stateless"
POLL_S = 0.1


def check_placement_fields(block: ServerBlock) -> None:
    """``replicas`` and ``startup_timeout_s``, read by the launcher: a bad value is a config error naming it."""
    given = block.fields.get(REPLICAS_FIELD)
    if given is not None and (isinstance(given, bool) or not isinstance(given, int) or given < 1):
        raise ConfigError(
            f"config: {block.named(REPLICAS_FIELD)} is {given!r}; it is a whole number >= 1",
            key=block.config_key(REPLICAS_FIELD),
            source=block.set_by(REPLICAS_FIELD),
        )
    limit = block.fields.get(STARTUP_TIMEOUT_FIELD)
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int | float) or limit <= 0):
        raise ConfigError(
            f"config: {block.named(STARTUP_TIMEOUT_FIELD)} is {limit!r}; it is a number of seconds > 0",
            key=block.config_key(STARTUP_TIMEOUT_FIELD),
            source=block.set_by(STARTUP_TIMEOUT_FIELD),
        )


# Copies a block does not ask for are not worth starting for fewer rows. Measured on 2 cores with NeMo Gym's mcqa
# taking rows by /verify_batch (benchmarks/run_benchmark.py --server nemo_gym --replicas 1 2): the server spends
# about 0.3 ms of CPU a row and the CLI about 0.25, so a second copy adds only the CPU the two leave idle, 3,654 ->
# 4,466 rows/s (1.22x), and costs about 2.5 s of CPU to start. 10,000 rows: 7.5 s with one copy, 8.9 s with two;
# 100,000 rows: 38.3 s and 34.4 s. The copy pays for its start-up from about 50,000 rows.
ROWS_WORTH_A_COPY = 50_000


def wanted_replicas(
    block: ServerBlock, mode: str, *, force: bool, rows: int | None = None, cores: int | None = None
) -> int:
    """``rows``: how many the copies would share (None: a server that stays up, ``reverify serve``'s)."""
    if block.url:
        return 1  # not ours to start
    given = block.fields.get(REPLICAS_FIELD)
    if mode != STATELESS and not force:
        if given is not None and given > 1:
            log.warning(
                "WARNING: %r runs as 1 process, not the %d %s asks for: it is not declared stateless "
                "(reverify_mode %s); --force runs copies of it anyway",
                block.instance,
                given,
                block.named(REPLICAS_FIELD),
                mode,
            )
        return 1
    if given is not None:
        return int(given)
    if mode != STATELESS or runs_builtin(block) or (rows is not None and rows < ROWS_WORTH_A_COPY):
        return 1
    return cores or len(os.sched_getaffinity(0))  # the cores this process may run on, not the machine's


async def add_replicas(fleet: ServerFleet, instance: str, count: int, joined: Callable[[str], int]) -> None:
    """Start ``count`` copies and hand each to ``joined`` (which answers how many copies there are now) as soon
    as it answers; one that fails is left out, and said."""
    try:
        waiting = fleet.add_replicas(instance, count)
    except ReverifyError as exc:
        log.warning("WARNING: more copies of %r could not be started (%s); going on without them", instance, exc)
        return
    log.info("reverify: starting %d more copies of %r", count, instance)
    while waiting:
        await asyncio.sleep(POLL_S)
        for child in list(waiting):
            try:
                url = fleet.replica_url(child)
            except ReverifyError as exc:
                waiting.remove(child)
                log.warning("WARNING: %s; going on without it", exc)
                continue
            if url is not None:
                waiting.remove(child)
                log.info("reverify: a copy of %r joined at %s (%d copies)", instance, url, joined(url))
