"""A rescoring kept in ``configs/rescorings/<name>.yaml``: what it reads, which verifier, how it shards.

Example::

    description: The bundled mcqa sample under lenient boxed grading.
    verifier:
      config: [configs/mcqa.yaml]
      overrides: ["++mcqa.resources_servers.mcqa.grading_mode=lenient_boxed"]
    sources:                       # either one pair of files ...
      inputs: samples/mcqa/rollouts_materialized_inputs.jsonl
      rollouts: samples/mcqa/rollouts.jsonl
    # watch: {folder: incoming/mcqa}   ... or a folder whose */rollouts.jsonl are discovered
    variants:                      # optional: several verifiers on the same shards, assets of their own each
      strict: {overrides: ["++mcqa.resources_servers.mcqa.grading_mode=strict_single_letter_boxed"]}
      lenient: {overrides: ["++mcqa.resources_servers.mcqa.grading_mode=lenient_boxed"]}
    shard_tasks: 25                # tasks per shard; every rollout of a task lands in the same shard
    output_dir: results/rescorings/mcqa_sample
    max_failure_rate: 0.05         # a shard with more failures than this is blocked from the metrics
    schedule: {cron: "0 3 * * *"}  # re-score stale and missing shards nightly

Relative paths are relative to the project root (the folder holding ``configs/``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from reverify_assets.errors import ConfigError

RESCORINGS_DIR = Path("configs") / "rescorings"
# No "__": it joins a rescoring's name to a variant's in group, op and job names.
NAME_PATTERN = re.compile(r"^[A-Za-z](?:_?[A-Za-z0-9])*$")
# Folders of <output_dir> beside the variants' own: the variants' comparison and the shared key indexes.
COMPARISON_DIR = "comparison"
RESERVED_VARIANTS = frozenset({COMPARISON_DIR, "index_cache"})


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class VerifierRef(_Strict):
    config: list[str] = Field(min_length=1, description="verifier config files, merged in order")
    overrides: list[str] = Field(default_factory=list)


class FixedSources(_Strict):
    inputs: str
    rollouts: str


class WatchedFolder(_Strict):
    folder: str
    pattern: str = Field(default="*/rollouts.jsonl", description="rollouts files; inputs sit beside each")
    # `gym eval run` appends to rollouts.jsonl for the whole collection: a pair is taken up only once
    # neither file has changed for this long.
    settle_s: float = Field(default=300.0, ge=0.0)


class Variant(_Strict):
    """A verifier variant: its config files come after the rescoring's, its overrides after its overrides."""

    config: list[str] = Field(default_factory=list)
    overrides: list[str] = Field(default_factory=list)


class Schedule(_Strict):
    cron: str
    timezone: str = "UTC"


class RescoringSpec(_Strict):
    name: str
    description: str = ""
    verifier: VerifierRef
    sources: FixedSources | None = None
    watch: WatchedFolder | None = None
    variants: dict[str, Variant] = Field(default_factory=dict)
    shard_tasks: int = Field(default=2500, ge=1)
    output_dir: str
    concurrency: int = Field(default=64, ge=1)
    max_failure_rate: float = Field(default=0.05, ge=0.0, le=1.0)
    schedule: Schedule | None = None
    root: Path = Field(description="project root the relative paths resolve against")

    @model_validator(mode="after")
    def _one_kind_of_source(self) -> RescoringSpec:
        if (self.sources is None) == (self.watch is None):
            raise ValueError("give exactly one of `sources` (inputs + rollouts) or `watch` (a folder)")
        if not NAME_PATTERN.match(self.name):
            raise ValueError(
                f"the file name {self.name!r} must be letters, digits and single underscores (it names assets)"
            )
        for variant in self.variants:
            if not NAME_PATTERN.match(variant):
                raise ValueError(f"variant name {variant!r} must be letters, digits and single underscores")
            if variant in RESERVED_VARIANTS:
                raise ValueError(f"variant name {variant!r} is reserved (it names the {variant} folder and group)")
        return self

    def path(self, relative: str) -> Path:
        candidate = Path(relative).expanduser()
        return candidate if candidate.is_absolute() else self.root / candidate

    @property
    def config_paths(self) -> list[Path]:
        return [self.path(p) for p in self.verifier.config]

    @property
    def variant_names(self) -> list[str | None]:
        """None stands for the rescoring's own verifier when it names no variants."""
        return list(self.variants) or [None]

    def verifier_of(self, variant: str | None) -> tuple[list[Path], list[str]]:
        """The config files and overrides of one variant (or of the rescoring itself)."""
        extra = self.variants[variant] if variant is not None else Variant()
        return self.config_paths + [self.path(p) for p in extra.config], self.verifier.overrides + extra.overrides

    @property
    def outputs(self) -> Path:
        return self.path(self.output_dir)


def load_rescoring(path: Path, root: Path) -> RescoringSpec:
    try:
        raw = OmegaConf.to_container(OmegaConf.load(path), resolve=True)
    except Exception as exc:  # yaml and OmegaConf raise several types; all mean "not valid YAML"
        raise ConfigError(f"rescoring {path}: not valid YAML: {exc}", source=str(path)) from exc
    if not isinstance(raw, dict):
        raise ConfigError(f"rescoring {path}: must hold a mapping", source=str(path))
    try:
        spec = RescoringSpec.model_validate({**raw, "name": path.stem, "root": root})
    except ValidationError as exc:
        raise ConfigError(f"rescoring {path}: {_describe(exc)}", key=_first_field(exc), source=str(path)) from exc
    for config in spec.config_paths:
        if not config.is_file():
            raise ConfigError(
                f"rescoring {path}: field `verifier.config`: file not found: {config}",
                key="verifier.config",
                source=str(path),
            )
    for name, variant in spec.variants.items():
        for config in (spec.path(p) for p in variant.config):
            if not config.is_file():
                raise ConfigError(
                    f"rescoring {path}: field `variants.{name}.config`: file not found: {config}",
                    key=f"variants.{name}.config",
                    source=str(path),
                )
    return spec


def load_rescorings(root: Path) -> list[RescoringSpec]:
    folder = root / RESCORINGS_DIR
    specs = [load_rescoring(path, root) for path in sorted(folder.glob("*.yaml"))] if folder.is_dir() else []
    owners: dict[Path, str] = {}
    for spec in specs:
        # Shard files are named by source and config, not by rescoring: sharing a folder would mix results.
        owner = owners.setdefault(spec.outputs.resolve(), spec.name)
        if owner != spec.name:
            raise ConfigError(
                f"rescoring {folder / f'{spec.name}.yaml'}: field `output_dir`: {spec.output_dir} is already the "
                f"output_dir of rescoring {owner!r}; give each rescoring its own",
                key="output_dir",
                source=str(folder / f"{spec.name}.yaml"),
            )
    return specs


def find_rescoring(root: Path, name: str) -> RescoringSpec:
    path = root / RESCORINGS_DIR / f"{name}.yaml"
    if not path.is_file():
        known = [spec.name for spec in load_rescorings(root)]
        raise ConfigError(f"no rescoring {name!r} in {root / RESCORINGS_DIR} (known: {known})", source=str(path))
    return load_rescoring(path, root)


def _describe(exc: ValidationError) -> str:
    def field(error: Any) -> str:
        location = _location(error)
        return f"field `{location}`: {error['msg']}" if location else error["msg"]

    return "; ".join(field(error) for error in exc.errors())


def _first_field(exc: ValidationError) -> str | None:
    """The dotted key of the first field ``_describe`` names; None: the file as a whole."""
    return _location(exc.errors()[0]) or None


def _location(error: Any) -> str:
    return ".".join(str(part) for part in error["loc"])
