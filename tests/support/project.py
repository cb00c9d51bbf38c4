"""A throwaway project with one rescoring in configs/rescorings, over synthetic NeMo Gym data."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from reverify_assets.synthetic.mcqa_rollouts import SyntheticSpec, write_mcqa_dataset
from tests.support.cli import ROOT

LENIENT = "++mcqa.resources_servers.mcqa.grading_mode=lenient_boxed"
STRICT = "++mcqa.resources_servers.mcqa.grading_mode=strict_single_letter_boxed"
# A rescoring's two variants, strict against lenient: its comparison asset compares them.
VARIANTS = f'variants:\n  strict: {{overrides: ["{STRICT}"]}}\n  lenient: {{overrides: ["{LENIENT}"]}}\n'


@dataclass(frozen=True)
class Project:
    root: Path
    name: str
    inputs: Path
    rollouts: Path

    @property
    def rescoring_file(self) -> Path:
        return self.root / "configs" / "rescorings" / f"{self.name}.yaml"

    def write_rescoring(
        self, *, override: str = LENIENT, shard_tasks: int = 10, extra: str = "", verifier: str = "configs/mcqa.yaml"
    ) -> None:
        self.rescoring_file.write_text(
            "description: test rescoring\n"
            f'verifier:\n  config: [{verifier}]\n  overrides: ["{override}"]\n'
            f"sources:\n  inputs: {self.inputs}\n  rollouts: {self.rollouts}\n"
            f"shard_tasks: {shard_tasks}\noutput_dir: results/{self.name}\n{extra}"
        )

    def results(self) -> Path:
        return self.root / "results" / self.name


def make_project(tmp_path: Path, *, tasks: int = 40, rollouts_per_task: int = 4, name: str = "bench") -> Project:
    root = tmp_path / "project"
    (root / "configs" / "rescorings").mkdir(parents=True)
    shutil.copy(ROOT / "configs" / "mcqa.yaml", root / "configs" / "mcqa.yaml")
    shutil.copy(ROOT / "workspace.yaml", root / "workspace.yaml")
    shutil.copy(ROOT / "definitions.py", root / "definitions.py")
    inputs, rollouts = write_mcqa_dataset(
        tmp_path / "data", SyntheticSpec(tasks=tasks, rollouts_per_task=rollouts_per_task)
    )
    project = Project(root, name, inputs, rollouts)
    project.write_rescoring()
    return project
