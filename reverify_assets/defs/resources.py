"""The Dagster resources of a run: what one rescoring reads, which verifier it uses and where it writes
(``RescoringResource``), and what the command's start-up prepared for it (``startup_resource``).

The rescoring's config is the run config of the run, which Dagster keeps and shows as it is: an override holding
a secret (an API key given on the command line) appears there redacted, and the command hands the overrides as
given to its own run in its ``StartupHandoff``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg
from pydantic import Field, PrivateAttr

from reverify_assets.errors import StateError
from reverify_assets.files.names import output_partition_key
from reverify_assets.processes import secrets as process_secrets
from reverify_assets.run.options import AggregateFlags, RunFlags, RunOptions
from reverify_assets.run.preparation import VerifierSetup, load_verifier_setup
from reverify_assets.run.startup_handoff import StartupHandoff
from reverify_assets.run.verification import VerifyStep


class VerifierConfigResource(dg.ConfigurableResource):
    """The verifier config a run uses: its files and overrides, secrets kept out of the run config."""

    config_paths: list[str] = Field(description="NeMo-Gym-shaped verifier config files, merged in order")
    overrides: list[str] = Field(default_factory=list, description="++dotted.key=value overrides (secrets redacted)")
    overrides_redacted: bool = Field(
        default=False, description="a secret in the overrides is redacted here: only the command's own run has it"
    )
    # What a run recorded before overrides_redacted said the same with (the name of the environment variable that
    # held them): kept so that such a run's config still loads, and its re-execution is refused as any other's.
    secret_overrides_env: str | None = Field(default=None, description="(runs recorded before overrides_redacted)")
    # Loaded once per run's process (the CLI's runs have one): each step that needs it gets the same.
    _setup: VerifierSetup | None = PrivateAttr(default=None)

    @staticmethod
    def config_values(config_paths: list[Path], overrides: list[str]) -> dict[str, Any]:
        """The fields of a command's own run: absolute paths (a step may run in another directory), and the
        overrides redacted (the command's ``StartupHandoff`` has them as given)."""
        values: dict[str, Any] = {"config_paths": [str(path.resolve()) for path in config_paths]}
        shown = [process_secrets.redact(override) for override in overrides]
        return values | {"overrides": shown, "overrides_redacted": shown != list(overrides)}

    def given_overrides(self, startup: StartupHandoff) -> list[str]:
        """The overrides as the user gave them, secrets included."""
        if not (self.overrides_redacted or self.secret_overrides_env):
            return list(self.overrides)
        if startup.given_overrides is None:
            raise StateError(
                f"this run's overrides {self.overrides} hold a secret, which its run config does not keep: run it "
                "again from the command line, or give the key through the environment variable the config reads "
                "it from"
            )
        return list(startup.given_overrides)

    def verifier_setup(self, startup: StartupHandoff) -> VerifierSetup:
        if self._setup is None:
            self._setup = load_verifier_setup([Path(p) for p in self.config_paths], self.given_overrides(startup))
        return self._setup


class RescoringResource(VerifierConfigResource, RunFlags):
    """A run's flags (``RunFlags``, declared there) and its verifier config. Paths are as the user gave them;
    relative ones resolve against the process's working directory."""

    @classmethod
    def for_run(cls, options: RunOptions) -> RescoringResource:
        """The resource of one `reverify run`, with absolute paths (a step may run in another directory)."""
        values = options.flags().model_dump()
        for name in ("inputs", "rollouts", "output"):
            values[name] = str(Path(values[name]).resolve())
        return cls(**values, **cls.config_values(options.config_files, list(options.overrides)))

    def verifier_setup(self, startup: StartupHandoff) -> VerifierSetup:
        return (
            super().verifier_setup(startup).for_run(no_judge_cache=self.no_judge_cache, recovery=self.judge_failed_only)
        )

    @property
    def partition_key(self) -> str:
        """The output's absolute path: the partition of the ``reverify`` and ``judge_recovery`` assets it has."""
        return output_partition_key(Path(self.output))

    def verify_step(self, *, responses: str) -> VerifyStep:
        return VerifyStep.of(self, responses=Path(responses))


def startup_resource(handoff: StartupHandoff | None = None) -> dg.ResourceDefinition:
    """The command's ``handoff`` for its own run; without one, each run gets an empty one of its own."""
    if handoff is not None:
        return dg.ResourceDefinition.hardcoded_resource(handoff, "what the command's start-up prepared")
    return dg.ResourceDefinition(
        resource_fn=lambda _: StartupHandoff(),
        description="nothing prepared: the run starts its own servers and does its own scans",
    )


class ShardAggregateResource(VerifierConfigResource, AggregateFlags):
    """What one ``reverify aggregate`` merges, and where (``AggregateFlags``, declared there)."""

    @property
    def partition_key(self) -> str:
        return output_partition_key(Path(self.output))


def refuse_other_partition(partition_key: str, resource: str, writes: str) -> None:
    """A run's partition names the output its resource writes: one launched on another output's partition
    would record these files' results as that output's."""
    if partition_key != writes:
        raise StateError(
            f"this run is of partition {partition_key!r}, but its {resource} resource writes {writes!r}: launch "
            f"it on partition {writes!r} (add it if the partitions list lacks it), or set the resource's output "
            "to the partition's file",
            path=writes,
        )
