"""The Dagster resources of a run: what one rescoring reads, which verifier it uses and where it writes
(``RescoringResource``), and what the command's start-up prepared for it (``startup_resource``).

The rescoring's config is the run config of the run, which Dagster keeps and shows as it is: an override holding
a secret (an API key given on the command line) appears there redacted, and the overrides as given are read from
the environment variable ``secret_overrides_env`` names, set by the command line for its own run.
"""

from __future__ import annotations

import os
from pathlib import Path

import dagster as dg
import orjson
from pydantic import Field, PrivateAttr

from reverify_assets.errors import ReverifyError
from reverify_assets.lib import process_secrets
from reverify_assets.lib.resume_cache import max_attempts_from
from reverify_assets.pipeline.options import DEFAULT_CONCURRENCY, RunOptions
from reverify_assets.pipeline.output_files import OutputPolicy
from reverify_assets.pipeline.preparation import VerifierSetup, load_verifier_setup
from reverify_assets.pipeline.startup_handoff import StartupHandoff
from reverify_assets.pipeline.verification import VerifyStep

SECRET_OVERRIDES_ENV = "REVERIFY_RUN_OVERRIDES"


class RescoringResource(dg.ConfigurableResource):
    """Paths are as the user gave them; relative ones resolve against the process's working directory."""

    config_paths: list[str] = Field(description="NeMo-Gym-shaped verifier config files, merged in order")
    overrides: list[str] = Field(default_factory=list, description="++dotted.key=value overrides (secrets redacted)")
    secret_overrides_env: str | None = Field(
        default=None, description="the environment variable holding the overrides as given (a JSON list)"
    )
    inputs: str = Field(description="rollouts_materialized_inputs.jsonl")
    rollouts: str = Field(description="rollouts.jsonl (the successes, in judge recovery)")
    output: str = Field(description="where the reverified rows go (.jsonl)")
    force: bool = False
    overwrite: bool = False
    resume: bool = False
    judge_failed_only: bool = Field(default=False, description="recover the judge failures of --rollouts")
    append: bool = Field(default=False, description="judge recovery onto an existing output")
    limit: int | None = None
    concurrency: int = DEFAULT_CONCURRENCY
    max_attempts: int | None = Field(default=None, description="else $NEMO_GYM_MAX_ROLLOUT_ATTEMPTS, else 3")
    allow_mixed_configs: bool = Field(default=False, description="resume an output another verifier config began")
    # Loaded once per run's process (the CLI's runs have one): each step that needs it gets the same.
    _setup: VerifierSetup | None = PrivateAttr(default=None)

    @classmethod
    def for_run(cls, options: RunOptions) -> RescoringResource:
        """The resource of one `reverify run`, with absolute paths (a step may run in another directory)."""
        values = options.model_dump(exclude={"disable_aggregation"})
        for name in ("inputs", "rollouts", "output"):
            values[name] = str(Path(values[name]).resolve())
        values["config_paths"] = [str(Path(p).resolve()) for p in values["config_paths"]]
        shown = [process_secrets.redact(override) for override in options.overrides]
        if shown != list(options.overrides):
            os.environ[SECRET_OVERRIDES_ENV] = orjson.dumps(list(options.overrides)).decode()
            values |= {"overrides": shown, "secret_overrides_env": SECRET_OVERRIDES_ENV}
        return cls(**values)

    def given_overrides(self) -> list[str]:
        """The overrides as the user gave them, secrets included."""
        if self.secret_overrides_env is None:
            return list(self.overrides)
        given = os.environ.get(self.secret_overrides_env)
        if given is None:
            raise ReverifyError(
                f"this run's overrides {self.overrides} hold a secret, which its run config does not keep: set "
                f"{self.secret_overrides_env} to the overrides as given (a JSON list) in the environment of the "
                "process that runs it (the code location's, for a re-execution from the UI), or give the key "
                "through the environment variable the config reads it from"
            )
        return list(orjson.loads(given))

    def verifier_setup(self) -> VerifierSetup:
        if self._setup is None:
            self._setup = load_verifier_setup([Path(p) for p in self.config_paths], self.given_overrides())
        return self._setup

    def verify_step(self, *, responses: str) -> VerifyStep:
        policy = OutputPolicy(
            overwrite=self.overwrite,
            resume=self.resume,
            append=self.append,
            max_attempts=max_attempts_from(self.max_attempts),
            allow_mixed_configs=self.allow_mixed_configs,
        )
        return VerifyStep(
            inputs=Path(self.inputs),
            responses=Path(responses),
            output=Path(self.output),
            policy=policy,
            force=self.force,
            # Recovered rows were judged by this verifier once already, and failed: NeMo Gym skips the guard.
            skip_guard=self.judge_failed_only,
            concurrency=self.concurrency,
        )


def startup_resource(handoff: StartupHandoff | None = None) -> dg.ResourceDefinition:
    """The command's ``handoff`` for its own run; without one, each run gets an empty one of its own."""
    if handoff is not None:
        return dg.ResourceDefinition.hardcoded_resource(handoff, "what the command's start-up prepared")
    return dg.ResourceDefinition(
        resource_fn=lambda _: StartupHandoff(),
        description="nothing prepared: the run starts its own servers and does its own scans",
    )
