"""One verify step: start the servers, pass the guard, verify every pending row, stop the servers."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable, Coroutine, Mapping
from contextlib import AsyncExitStack, suppress
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import polars as pl

from reverify_assets.budget.judge_budget import JudgeBudget
from reverify_assets.budget.prices import judge_prices
from reverify_assets.config.topology import ServerBlock
from reverify_assets.errors import ServerError
from reverify_assets.files.names import RunFiles
from reverify_assets.files.output_lock import HeldOutputs, exclusive_output
from reverify_assets.keys.sorted_output import sort_by_key
from reverify_assets.processes import interrupts
from reverify_assets.resume.output_policy import OutputPolicy, check_step_sources, prepare_output
from reverify_assets.resume.settled_keys import max_attempts_from, resume_summary
from reverify_assets.rows.result_routing import provenance
from reverify_assets.rows.verifier_wire import RetryPolicy
from reverify_assets.run.options import RunFlags
from reverify_assets.run.preparation import VerifierSetup
from reverify_assets.run.replication import add_replicas, wanted_replicas
from reverify_assets.run.reverify_guard import enforce_guard, guard_message, probe_note, unsafe_servers
from reverify_assets.run.row_source import PairReader
from reverify_assets.run.verify_loop import VerifyStats, batch_sizes, verify_plan
from reverify_assets.verifier.client import Route, VerifierClient
from reverify_assets.verifier.launcher import PrestartedServers, ServerFleet
from reverify_assets.verifier.replicas import ReplicaSet

log = logging.getLogger("reverify")
T = TypeVar("T")


@dataclass(frozen=True)
class VerifyStep:
    """What one verify step is asked to do; ``responses`` is where each row's stored response is read."""

    inputs: Path
    responses: Path
    output: Path
    policy: OutputPolicy
    force: bool = False
    skip_guard: bool = False  # judge recovery: the rows were already judged once by this verifier
    concurrency: int = 64
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    max_judge_calls: int | None = None
    max_cost: float | None = None

    @classmethod
    def of(cls, flags: RunFlags, *, responses: Path) -> VerifyStep:
        """The step a run's flags ask for (``responses``: the rollouts, or in judge recovery the rows to recover)."""
        policy = OutputPolicy(
            overwrite=flags.overwrite,
            resume=flags.resume,
            append=flags.append,
            max_attempts=max_attempts_from(flags.max_attempts),
            allow_mixed_configs=flags.allow_mixed_configs,
        )
        return cls(
            inputs=flags.inputs_file,
            responses=responses,
            output=flags.output_file,
            policy=policy,
            force=flags.force,
            # Recovered rows were judged by this verifier once already, and failed: NeMo Gym skips the guard.
            skip_guard=flags.judge_failed_only,
            concurrency=flags.concurrency,
            max_judge_calls=flags.max_judge_calls,
            max_cost=flags.max_cost,
        )

    def budget(self, config: Mapping[str, Any]) -> JudgeBudget | None:
        if self.max_judge_calls is None and self.max_cost is None:
            return None
        return JudgeBudget(self.max_judge_calls, self.max_cost, judge_prices(config))


@dataclass(frozen=True)
class VerificationResult:
    files: RunFiles
    stats: VerifyStats
    reverify_modes: dict[str, str]
    unsafe: bool
    skipped: int  # rows the output (or its sidecar) had already settled
    routes: dict[str, str]  # how each server's rows were sent, as the summary says it


def describe_route(route: Route, rows: int) -> str:
    return f"{route}, {rows} rows a request" if route is not Route.VERIFY else f"{route}, one request a row"


def routed_blocks(setup: VerifierSetup, plan: pl.DataFrame) -> list[ServerBlock]:
    return [setup.topology.servers[name] for name in sorted(plan["server"].unique().to_list())]


def planned_rows(plan: pl.DataFrame, server: str) -> int:
    return plan.filter(pl.col("server") == server).height


def client_session(concurrency: int) -> aiohttp.ClientSession:
    # One keep-alive pool for the whole run: a new connection per row costs more than grading it.
    connector = aiohttp.TCPConnector(limit=concurrency, limit_per_host=concurrency)
    return aiohttp.ClientSession(connector=connector)


def run_verification(
    plan: pl.DataFrame,
    setup: VerifierSetup,
    step: VerifyStep,
    on_progress: Callable[[VerifyStats], None] | None = None,
    prestarted: PrestartedServers | None = None,
    held: HeldOutputs | None = None,
) -> VerificationResult:
    """``prestarted``: servers the command started ahead, borrowed for the blocks they were started for;
    ``held``: the outputs whose locks the command holds."""
    fleet = ServerFleet(routed_blocks(setup, plan), setup.config, prestarted, judge_cache=setup.judge_cache)
    with fleet as urls:
        return asyncio.run(_interruptible(_verify(plan, setup, step, fleet, urls, on_progress, held)))


async def _interruptible(work: Coroutine[Any, Any, T]) -> T:
    """Ctrl-C or SIGTERM cancels ``work`` (which keeps every settled row) and is raised as KeyboardInterrupt.

    Otherwise the signal handler in force (Dagster's, in a step) raises wherever the signal lands: inside
    one of asyncio's callbacks, asyncio logs the exception and carries on, and the run ignores the Ctrl-C.
    Only the main thread may take signals; elsewhere ``work`` runs as it is.
    """
    loop, task = asyncio.get_running_loop(), asyncio.current_task()
    previous = {signum: signal.getsignal(signum) for signum in interrupts.INTERRUPTS}
    interrupted = False

    def interrupt(signum: int) -> None:
        nonlocal interrupted
        interrupted = True
        interrupts.note(signum)  # the loop holds the wakeup pipe that would have noted it
        if task is not None:
            task.cancel()

    try:
        for signum in previous:
            loop.add_signal_handler(signum, interrupt, signum)
    except (RuntimeError, ValueError, NotImplementedError):
        return await work
    try:
        return await work
    except asyncio.CancelledError:
        if interrupted:
            raise KeyboardInterrupt from None
        raise
    finally:
        for signum, handler in previous.items():
            loop.remove_signal_handler(signum)
            signal.signal(signum, handler)
        interrupts.watch_again()


async def _verify(
    plan: pl.DataFrame,
    setup: VerifierSetup,
    step: VerifyStep,
    fleet: ServerFleet,
    urls: dict[str, str],
    on_progress: Callable[[VerifyStats], None] | None,
    held: HeldOutputs | None,
) -> VerificationResult:
    async with AsyncExitStack() as stack:
        session = await stack.enter_async_context(client_session(step.concurrency))
        clients = {name: ReplicaSet(VerifierClient(name, url, session, step.retry)) for name, url in urls.items()}
        modes = await _reverify_modes(clients)
        unsafe = False if step.skip_guard else enforce_guard(modes, force=step.force)
        if unsafe:
            log.warning("WARNING: %s Continuing because --force was given.", guard_message(unsafe_servers(modes)))
            log.warning("%s", probe_note(setup.config_hash))
        files = RunFiles.for_output(step.output, unsafe=unsafe)
        check_step_sources(files, step.inputs, step.responses, step.policy)
        stack.enter_context(exclusive_output(files.output, held))
        cache = prepare_output(files, step.policy, setup.config_hash)
        pending = plan
        if cache is not None:
            if step.policy.resume and step.policy.announce_resume:
                for line in resume_summary(cache, plan):
                    log.info("%s", line)
            pending = cache.pending(plan)
            if pending.is_empty():
                log.warning("WARNING: Nothing to be re-verified.")
        for name, client in clients.items():
            block = setup.topology.servers[name]
            if (copies := wanted_replicas(block, modes[name], force=step.force, rows=planned_rows(pending, name))) > 1:
                joined = partial(_join, client, name, session, step.retry)
                growth = add_replicas(fleet, name, copies - 1, joined)
                stack.push_async_callback(_cancelled, asyncio.create_task(growth))
        stamps = {name: provenance(setup.config_hash, setup.topology.servers[name], modes[name]) for name in clients}
        pairs = stack.enter_context(PairReader(step.inputs, step.responses))
        names = list(clients)
        offered = dict(zip(names, await asyncio.gather(*(clients[name].route() for name in names)), strict=True))
        routes = {name: route for name, (route, _) in offered.items()}
        sizes = batch_sizes({name: rows for name, (_, rows) in offered.items()}, step.concurrency)
        stats = await verify_plan(
            pending,
            pairs,
            clients,
            files,
            stamps,
            concurrency=step.concurrency,
            batch_rows=sizes,
            routes=routes,
            on_progress=on_progress,
            budget=step.budget(setup.config),
        )
        # Still holding the output's lock. --append may target the user's own rollouts file: never rewrite
        # that. A fresh file whose rows all settled in key order is sorted already.
        if not step.policy.append and not (cache is None and stats.output_in_key_order):
            sort_by_key(files.output)
    described = {name: describe_route(routes[name], sizes[name]) for name in names}
    return VerificationResult(files, stats, modes, unsafe, plan.height - pending.height, described)


def _join(replicas: ReplicaSet, name: str, session: aiohttp.ClientSession, retry: RetryPolicy, url: str) -> int:
    return replicas.add(VerifierClient(name, url, session, retry))


async def _cancelled(task: asyncio.Task[None]) -> None:
    """Copies still starting when the rows are done are not waited for (the fleet stops them)."""
    task.cancel()
    with suppress(asyncio.CancelledError):
        await task


async def _reverify_modes(clients: Mapping[str, VerifierClient]) -> dict[str, str]:
    names = sorted(clients)
    modes = await asyncio.gather(*(_reverify_mode(name, clients[name]) for name in names))
    return dict(zip(names, modes, strict=True))


async def _reverify_mode(name: str, client: VerifierClient) -> str:
    try:
        return await client.reverify_mode()
    except ConnectionError as exc:
        raise ServerError(f"cannot reach a resources server: {exc}", server=name) from exc
