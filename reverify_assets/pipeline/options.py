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
    resume: bool = False
    judge_failed_only: bool = False
    append: bool = False
    disable_aggregation: bool = False
    limit: int | None = None
    concurrency: int = DEFAULT_CONCURRENCY
    max_attempts: int | None = None
    allow_mixed_configs: bool = False
    max_judge_calls: int | None = None
    max_cost: float | None = None
    no_judge_cache: bool = False

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
        if self.output.suffix != ".jsonl":
            raise UsageError(f"--output must name a .jsonl file, got {self.output}")
