"""What a user asks of ``reverify run``, validated before anything starts."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from reverify_assets.errors import UsageError

# NeMo Gym schedules every row at once when --concurrency is omitted; we bound it so memory stays flat.
DEFAULT_CONCURRENCY = 64


class RunOptions(BaseModel):
    config_paths: list[Path] = Field(min_length=1)
    overrides: list[str] = Field(default_factory=list)
    inputs: Path
    rollouts: Path
    output: Path
    force: bool = False
    overwrite: bool = False
    disable_aggregation: bool = False
    limit: int | None = None
    concurrency: int = DEFAULT_CONCURRENCY

    def check_flags(self) -> None:
        if self.limit is not None and self.limit < 1:
            raise UsageError(f"--limit must be a positive number of rows, got {self.limit}")
        if self.concurrency < 1:
            raise UsageError(f"--concurrency must be at least 1, got {self.concurrency}")
        if self.output.suffix != ".jsonl":
            raise UsageError(f"--output must name a .jsonl file, got {self.output}")
        for flag, path in (("--inputs", self.inputs), ("--rollouts", self.rollouts)):
            if path.resolve() == self.output.resolve():
                raise UsageError(f"--output {self.output} is the same file as {flag}")
