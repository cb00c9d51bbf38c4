"""The Dagster resource that says what one rescoring reads, which verifier it uses and where it writes."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
from pydantic import Field

from reverify_assets.pipeline.options import DEFAULT_CONCURRENCY, RunOptions
from reverify_assets.pipeline.preparation import VerifierSetup, load_verifier_setup


class RescoringResource(dg.ConfigurableResource):
    """Paths are as the user gave them; relative ones resolve against the process's working directory."""

    config_paths: list[str] = Field(description="NeMo-Gym-shaped verifier config files, merged in order")
    overrides: list[str] = Field(default_factory=list, description="++dotted.key=value overrides")
    inputs: str = Field(description="rollouts_materialized_inputs.jsonl")
    rollouts: str = Field(description="rollouts.jsonl")
    output: str = Field(description="where the reverified rows go (.jsonl)")
    force: bool = False
    overwrite: bool = False
    limit: int | None = None
    concurrency: int = DEFAULT_CONCURRENCY

    def options(self) -> RunOptions:
        return RunOptions(
            config_paths=[Path(p) for p in self.config_paths],
            overrides=list(self.overrides),
            inputs=Path(self.inputs),
            rollouts=Path(self.rollouts),
            output=Path(self.output),
            force=self.force,
            overwrite=self.overwrite,
            limit=self.limit,
            concurrency=self.concurrency,
        )

    def verifier_setup(self) -> VerifierSetup:
        return load_verifier_setup([Path(p) for p in self.config_paths], list(self.overrides))
