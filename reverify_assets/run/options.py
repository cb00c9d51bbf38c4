"""The flags of ``reverify run`` and ``reverify aggregate``, declared once, and checked before anything starts.

``RunFlags`` is what a run of the rescoring assets is asked to do; ``RunOptions`` adds what only the command knows
(its config files, overrides and modes). ``AggregateFlags`` and ``AggregateOptions`` are the same for
``reverify aggregate``. Everything else derives from these:
- the command's parser (``cli.flags.add_flags``): one option a field, named for it, its help the description;
- the run config a Dagster run keeps (``defs.resources.RescoringResource`` is a ``RunFlags``,
  ``ShardAggregateResource`` an ``AggregateFlags``), which the UI shows with the same descriptions and a
  re-execution runs again;
- the verify step's options (``output_policy``, ``VerifyStep.of``).

Paths are strings, as Dagster's run config holds them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from reverify_assets.errors import UsageError

# NeMo Gym schedules every row at once when --concurrency is omitted; we bound it so memory stays flat.
DEFAULT_CONCURRENCY = 64


def flag(
    help_text: str,
    default: Any = ...,
    *,
    option: str | None = None,
    short: str | None = None,
    metavar: str | None = None,
    positional: bool = False,
) -> Any:
    """A field that is a command-line option (``cli.flags``): ``option`` when its name is not the field's
    (``--config``), ``short`` its one-letter alias, ``metavar`` what its help calls its value; ``positional``
    an argument given without a name."""
    given = {"option": option, "short": short, "metavar": metavar, "positional": positional}
    return Field(default, description=help_text, json_schema_extra={k: v for k, v in given.items() if v} or None)


class VerifierConfigFlags(BaseModel):
    config_paths: list[str] = flag("verifier config YAML (repeatable)", option="--config", metavar="CONFIG")

    @property
    def config_files(self) -> list[Path]:
        return [Path(path) for path in self.config_paths]


class RunFlags(BaseModel):
    inputs: str = flag("rollouts_materialized_inputs.jsonl")
    rollouts: str = flag("rollouts.jsonl (the successes, with --judge-failed-only)")
    output: str = flag("output .jsonl", short="-o")
    force: bool = flag("run against servers not declared stateless (unsafe_ files)", False)
    overwrite: bool = flag("delete an existing output and sidecar first", False)
    resume: bool = flag("continue an interrupted run from its output and sidecar", False)
    judge_failed_only: bool = flag(
        "re-judge only the judge failures of <rollouts stem>_failures.jsonl and carry the successes over", False
    )
    append: bool = flag("with --judge-failed-only: add to an existing output", False)
    limit: int | None = flag("verify only the first N rows of --rollouts", None)
    concurrency: int = flag(
        f"rows being verified at once, at most (default {DEFAULT_CONCURRENCY})", DEFAULT_CONCURRENCY
    )
    max_attempts: int | None = flag(
        "on --resume, skip keys with this many sidecar rows (default $NEMO_GYM_MAX_ROLLOUT_ATTEMPTS, else 3)", None
    )
    allow_mixed_configs: bool = flag(
        "with --resume: continue an output whose rows another verifier config scored", False
    )
    no_judge_cache: bool = flag("ask the judges every time, without reading or filling the judge-call cache", False)
    max_judge_calls: int | None = flag(
        "stop sending rows once the judges made this many calls (--resume goes on)", None
    )
    max_cost: float | None = flag(
        "stop sending rows once the judge calls cost this much (at the config's judge_prices)", None
    )

    @property
    def inputs_file(self) -> Path:
        return Path(self.inputs)

    @property
    def rollouts_file(self) -> Path:
        return Path(self.rollouts)

    @property
    def output_file(self) -> Path:
        return Path(self.output)

    def check_flags(self) -> None:
        if self.append and not self.judge_failed_only:
            raise UsageError(
                "invalid configuration: `append` is only valid together with `judge_failed_only` "
                "(--append adds recovered rows to an existing output)"
            )
        if self.append and self.overwrite:
            raise UsageError("invalid configuration: `append` and `overwrite` are mutually exclusive")
        if self.limit is not None and self.limit < 1:
            raise UsageError(f"--limit must be a positive number of rows, got {self.limit}")
        if self.concurrency < 1:
            raise UsageError(f"--concurrency must be at least 1, got {self.concurrency}")
        if self.max_attempts is not None and self.max_attempts < 1:
            raise UsageError(f"--max-attempts must be at least 1, got {self.max_attempts}")
        if self.max_judge_calls is not None and self.max_judge_calls < 1:
            raise UsageError(f"--max-judge-calls must be at least 1, got {self.max_judge_calls}")
        if self.max_cost is not None and not self.max_cost > 0:
            raise UsageError(f"--max-cost must be more than 0, got {self.max_cost:g}")
        if Path(self.output).suffix != ".jsonl":
            raise UsageError(f"--output must name a .jsonl file, got {self.output_file}")


class RunOptions(RunFlags, VerifierConfigFlags):
    overrides: list[str] = Field(default_factory=list)  # the ++key=value tokens, wherever they stood
    disable_aggregation: bool = flag("skip the aggregate metrics (shards)", False)
    allow_prompt_mismatch: bool = flag(
        "verify rollouts whose prompt is not their input row's (an agent that rewrites its prompt)", False
    )
    dry_run: bool = flag(
        "say what the run would verify and skip, its judge calls, tokens and cost; write nothing, start nothing", False
    )

    def flags(self) -> RunFlags:
        return RunFlags.model_validate(self.model_dump(include=set(RunFlags.model_fields)))


class AggregateFlags(BaseModel):
    input_glob: str = flag("comma-separated globs of shard outputs", short="-i")
    output: str = flag("merged output .jsonl", short="-o")
    allow_mixed_configs: bool = flag(
        "aggregate rows scored by different verifier configs (each entry's provenance block lists them)", False
    )


class AggregateOptions(AggregateFlags, VerifierConfigFlags):
    """The health-check flags are ``gym eval aggregate``'s: the command turns them into its config keys."""

    no_health_check: bool = flag("skip NeMo Gym's rollout health checks (++disable_health_check)", False)
    health_check_workers: int | None = flag("rollout-health worker processes (default min(cpus, 8))", None, metavar="N")
    health_check_ignore: str | None = flag(
        "comma-separated rollout-health check IDs to exclude from the verdicts", None, metavar="IDS"
    )
