"""One shard of a rescoring, planned and verified: the work of one shard run, whoever launched it.

The plan depends on the verifier config (its servers route the rows), so it is made again in the same step
as the verification: a run that re-scores a shard for a new config can never verify an older config's plan.
"""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from reverify_assets.files.atomic import write_bytes_atomic, write_parquet_atomic
from reverify_assets.files.names import sidecar_path
from reverify_assets.keys.key_index import KEY_COLUMNS
from reverify_assets.keys.rollout_identity import allows_prompt_mismatch
from reverify_assets.rescoring.layout import RescoringLayout
from reverify_assets.rescoring.shard_gate import unresolved_failures
from reverify_assets.rescoring.shard_keys import parse_shard_key, task_range
from reverify_assets.rescoring.shard_plan import ShardPlan, plan_shard
from reverify_assets.rescoring.sources import source_by_id
from reverify_assets.resume.output_policy import OutputPolicy
from reverify_assets.resume.settled_keys import max_attempts_from
from reverify_assets.run.preparation import VerifierSetup
from reverify_assets.run.verification import VerificationResult, VerifyStep, run_verification
from reverify_assets.run.whole_output import WholeOutput, whole_output


@dataclass(frozen=True)
class PlannedShard:
    shard: str
    tasks: tuple[int, int]  # half-open
    inputs: Path
    rollouts: Path
    plan_file: Path
    plan: ShardPlan

    @property
    def is_sound(self) -> bool:
        """Every rollout joined its input row, and no key appears twice: the shard can be verified."""
        return self.plan.is_complete and not self.plan.has_duplicates


@dataclass(frozen=True)
class VerifiedShard:
    result: VerificationResult
    whole: WholeOutput
    failures_by_class: Counter[str]  # unresolved: keys no later attempt scored

    @property
    def rows(self) -> int:
        return self.whole.rows(self.result)

    @property
    def failures(self) -> int:
        return self.failures_by_class.total()

    @property
    def failure_rate(self) -> float:
        return self.failures / max(1, self.rows + self.failures)


def plan_shard_files(layout: RescoringLayout, setup: VerifierSetup, shard: str) -> PlannedShard:
    source_name, number = parse_shard_key(shard)
    source = source_by_id(layout.spec, source_name)
    cache, tasks = layout.index_cache, task_range(number, layout.spec.shard_tasks)
    plan = plan_shard(
        cache.inputs(source.inputs),
        cache.rollouts(source.rollouts),
        tasks,
        setup.topology,
        check_prompts=not allows_prompt_mismatch(setup.config),
    )
    target = layout.plan(shard)
    target.parent.mkdir(parents=True, exist_ok=True)
    write_parquet_atomic(plan.plan, target)
    return PlannedShard(shard, tasks, source.inputs, source.rollouts, target, plan)


def verify_shard(planned: PlannedShard, layout: RescoringLayout, setup: VerifierSetup) -> VerifiedShard:
    """Every /verify call of the shard; resumes what a failed attempt left, unless the shard's data changed."""
    output = layout.shard_output(planned.shard)
    restart_if_data_changed(output, shard_data_fingerprint(planned))
    step = VerifyStep(
        inputs=planned.inputs,
        responses=planned.rollouts,
        output=output,
        policy=OutputPolicy(resume=True, max_attempts=max_attempts_from(None), announce_resume=False),
        concurrency=layout.spec.concurrency,
    )
    result = run_verification(planned.plan.plan, setup, step)
    whole = whole_output(result, planned.plan.plan, step, against_stored=True)
    return VerifiedShard(result, whole, unresolved_failures(output))


def shard_data_fingerprint(planned: PlannedShard) -> str:
    """Which rows, from which file versions, a shard's results were scored from."""
    digest = hashlib.sha256()
    for path in (planned.inputs, planned.rollouts):
        stat = os.stat(path)
        digest.update(f"{path}|{stat.st_size}|{stat.st_mtime_ns}|{stat.st_ino}\n".encode())
    digest.update(planned.plan.plan.select(KEY_COLUMNS).write_csv().encode())
    return digest.hexdigest()[:16]


def restart_if_data_changed(output: Path, fingerprint: str) -> None:
    """Shards resume what an earlier attempt left; not when the rollouts or the shard's tasks changed since."""
    marker = output.with_name(f"{output.name}.source")
    if marker.exists() and marker.read_text().strip() != fingerprint:
        for stale in (output, sidecar_path(output)):
            stale.unlink(missing_ok=True)
    marker.parent.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(marker, f"{fingerprint}\n".encode())
