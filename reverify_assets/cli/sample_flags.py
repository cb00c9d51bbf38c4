"""The flags of the commands that score a sample of stored rollouts again (``probe``, ``noise``)."""

from __future__ import annotations

from pathlib import Path

from reverify_assets.errors import UsageError
from reverify_assets.run.options import DEFAULT_CONCURRENCY, VerifierConfigFlags, flag


class SampleFlags(VerifierConfigFlags):
    """Each command gives ``sample`` its own default, and says it in the help."""

    inputs: str = flag("rollouts_materialized_inputs.jsonl")
    rollouts: str = flag("rollouts.jsonl")
    sample: int
    seed: int = flag("which rows are drawn, and the orders (default 0)", 0)
    concurrency: int = flag(
        f"rows being verified at once, at most (default {DEFAULT_CONCURRENCY})", DEFAULT_CONCURRENCY
    )

    def checked_sources(self) -> tuple[Path, Path]:
        """``--inputs`` and ``--rollouts``, once the numbers are sound and both files can be read."""
        from reverify_assets.files.preflight import check_source_file

        for option, least in (("--sample", 1), ("--concurrency", 1)):
            if (value := getattr(self, option.removeprefix("--"))) < least:
                raise UsageError(f"{option} must be at least {least}, got {value}")
        inputs, rollouts = Path(self.inputs), Path(self.rollouts)
        for option, path in (("--inputs", inputs), ("--rollouts", rollouts)):
            check_source_file(option, path)
        return inputs, rollouts


def sample_flag(default: int) -> int:
    """The ``sample`` field of a command whose sample is ``default`` rows."""
    return flag(f"rows drawn (default {default})", default)  # type: ignore[no-any-return]


def report_path(given: str, inputs: Path, rollouts: Path) -> Path:
    """``--output``: a .json file that is neither source."""
    output = Path(given)
    if output.suffix != ".json":
        raise UsageError(f"--output must name a .json file, got {output}")
    for option, path in (("--inputs", inputs), ("--rollouts", rollouts)):
        if path.resolve() == output.resolve():
            raise UsageError(f"--output {output} is {option}: write the report elsewhere")
    return output
