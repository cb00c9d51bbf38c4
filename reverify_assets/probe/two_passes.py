"""``reverify probe``, and a rescoring's probe: a seeded sample of the stored rollouts, stratified by agent, scored
twice (by servers started apart, in different orders), against itself and against the rewards the rollouts stored
(``probe.report``). Both passes run without the judge-call cache (``repeated_scoring``): a second pass answered from
it would agree by construction. The report is kept in the Dagster home, where ``reverify run --force`` finds it.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from reverify_assets.errors import StateError
from reverify_assets.files.dagster_home import DEFAULT_PROBE_SAMPLE, probe_report_path
from reverify_assets.files.jsonl import write_json_atomic
from reverify_assets.keys.rollout_identity import allows_prompt_mismatch
from reverify_assets.keys.rollout_keys import RolloutKey
from reverify_assets.probe.repeated_scoring import sample_plan, score_repeatedly
from reverify_assets.probe.report import SHOWN_KEYS, Disagreement, ProbeReport, pair_agreement, verdict
from reverify_assets.rescoring.sources import discover_sources
from reverify_assets.rescoring.spec import RescoringSpec
from reverify_assets.run.options import DEFAULT_CONCURRENCY
from reverify_assets.run.preparation import VerifierSetup, index_inputs, index_rollouts, join_and_route
from reverify_assets.run.row_source import PairReader

AGENT_COLUMN = "agent"
NO_AGENT = "(no agent_ref)"
PASSES = 2


def run_probe(
    setup: VerifierSetup, inputs: Path, rollouts: Path, *, size: int, seed: int, concurrency: int
) -> tuple[ProbeReport, Path]:
    """The report, and where it is kept: in the Dagster home under the config's hash (``files.dagster_home``),
    where a later ``reverify run --force`` of the same config finds it. The passes write their rows beside it,
    and those go when the report is made."""
    kept = probe_report_path(setup.config_hash)
    kept.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".reverify-probe-", dir=kept.parent) as work:
        report = _probe(setup, inputs, rollouts, size=size, seed=seed, concurrency=concurrency, work=Path(work))
    write_json_atomic(kept, report.model_dump(mode="json"))
    return report, kept


def probe_first_source(spec: RescoringSpec, setup: VerifierSetup) -> tuple[ProbeReport, Path]:
    """A rescoring's probe (its asset check's evidence): ``reverify probe`` with its defaults, on the rescoring's
    first source."""
    sources = discover_sources(spec)
    if not sources:
        raise StateError(f"rescoring {spec.name!r} has no source to probe yet")
    source = sources[0]
    return run_probe(
        setup, source.inputs, source.rollouts, size=DEFAULT_PROBE_SAMPLE, seed=0, concurrency=DEFAULT_CONCURRENCY
    )


def _probe(
    setup: VerifierSetup, inputs: Path, rollouts: Path, *, size: int, seed: int, concurrency: int, work: Path
) -> ProbeReport:
    index = index_inputs(inputs)
    plan = join_and_route(
        index,
        index_rollouts(rollouts),
        setup.topology,
        keep_route=True,
        check_prompts=not allows_prompt_mismatch(setup.config),
    )
    agents = {route_id: _agent(route) for route_id, route in enumerate(index.routes)}
    plan = plan.with_columns(pl.col("route").replace_strict(agents, return_dtype=pl.String).alias(AGENT_COLUMN))
    sample = sample_plan(plan, size, seed, strata=AGENT_COLUMN)
    stored = _stored_rewards(inputs, rollouts, sample)
    first, second = score_repeatedly(
        setup, inputs, rollouts, sample, repeats=PASSES, work=work, seed=seed, concurrency=concurrency, skip_guard=True
    )
    both = sorted(set(first.rewards) & set(second.rewards))
    once = len(set(first.rewards) ^ set(second.rewards))  # scored by one pass, failed or masked by the other
    between = pair_agreement(*_rewards_of(both, first.rewards, second.rewards))
    compared = [key for key in both if stored.get(key) is not None]
    with_stored = pair_agreement(*_rewards_of(compared, stored, first.rewards))  # type: ignore[arg-type]
    separate = all(not setup.topology.servers[name].url for name in sample["server"].unique().to_list())
    return ProbeReport(
        verifier_config_hash=setup.config_hash,
        reverify_modes=first.reverify_modes,
        separate_processes=separate,
        seed=seed,
        sampled_rows=sample.height,
        rows_by_agent=dict(sorted(Counter(sample[AGENT_COLUMN].to_list()).items())),
        failures_by_pass=[first.failed, second.failed],
        scored_by_one_pass=once,
        between_passes=between,
        with_stored=with_stored,
        stored_missing=sum(1 for key in both if stored.get(key) is None),
        pass_disagreements=_disagreements(both, first.rewards, second.rewards),
        stored_disagreements=_disagreements(compared, stored, first.rewards),  # type: ignore[arg-type]
        verdict=verdict(between, with_stored, separate_processes=separate, scored_by_one_pass=once),
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
    )


def _agent(route: Mapping[str, Any]) -> str:
    agent = route.get("agent_ref")
    name = agent.get("name") if isinstance(agent, Mapping) else None
    return str(name) if name is not None else NO_AGENT


def _stored_rewards(inputs: Path, rollouts: Path, sample: pl.DataFrame) -> dict[RolloutKey, float | None]:
    stored: dict[RolloutKey, float | None] = {}
    columns = ("task", "rollout", "input_offset", "input_line", "rollout_offset", "rollout_line")
    with PairReader(inputs, rollouts) as pairs:
        for task, rollout, input_offset, input_line, rollout_offset, rollout_line in sample.select(columns).iter_rows():
            pair = pairs.read((task, rollout), (input_offset, input_line), (rollout_offset, rollout_line))
            stored[(task, rollout)] = None if pair.stored_masked else pair.stored_reward  # masked: no measurement
    return stored


def _rewards_of(
    keys: list[RolloutKey], first: Mapping[RolloutKey, float], second: Mapping[RolloutKey, float]
) -> tuple[np.ndarray, np.ndarray]:
    return np.array([first[key] for key in keys], dtype=float), np.array([second[key] for key in keys], dtype=float)


def _disagreements(
    keys: list[RolloutKey], first: Mapping[RolloutKey, float], second: Mapping[RolloutKey, float]
) -> list[Disagreement]:
    differ = [key for key in keys if first[key] != second[key]]
    return [Disagreement(task=t, rollout=r, first=first[(t, r)], second=second[(t, r)]) for t, r in differ[:SHOWN_KEYS]]
