"""The flags of the commands that score a sample of stored rollouts again (``probe``, ``noise``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from reverify_assets.errors import UsageError


def add_sample_arguments(command: argparse.ArgumentParser, default_sample: int) -> None:
    command.add_argument("--config", action="append", required=True, help="verifier config YAML (repeatable)")
    command.add_argument("--inputs", required=True, help="rollouts_materialized_inputs.jsonl")
    command.add_argument("--rollouts", required=True, help="rollouts.jsonl")
    command.add_argument("--sample", type=int, default=default_sample, help=f"rows drawn (default {default_sample})")
    command.add_argument("--seed", type=int, default=0, help="which rows are drawn, and the orders (default 0)")
    command.add_argument(
        "--concurrency", type=int, default=64, help="rows being verified at once, at most (default 64)"
    )


def checked_sources(args: argparse.Namespace) -> tuple[Path, Path]:
    """``--inputs`` and ``--rollouts``, once the numbers are sound and both files can be read."""
    from reverify_assets.files.preflight import check_source_file

    for flag, least in (("--sample", 1), ("--concurrency", 1)):
        if (value := getattr(args, flag.removeprefix("--"))) < least:
            raise UsageError(f"{flag} must be at least {least}, got {value}")
    inputs, rollouts = Path(args.inputs), Path(args.rollouts)
    for flag, path in (("--inputs", inputs), ("--rollouts", rollouts)):
        check_source_file(flag, path)
    return inputs, rollouts


def report_path(given: str, inputs: Path, rollouts: Path) -> Path:
    """``--output``: a .json file that is neither source."""
    output = Path(given)
    if output.suffix != ".json":
        raise UsageError(f"--output must name a .json file, got {output}")
    for flag, path in (("--inputs", inputs), ("--rollouts", rollouts)):
        if path.resolve() == output.resolve():
            raise UsageError(f"--output {output} is {flag}: write the report elsewhere")
    return output
