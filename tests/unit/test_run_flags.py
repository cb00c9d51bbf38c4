"""The run's flags are declared once (``run.options``): the parser, the run config and the verify step's
options are what that declaration says."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from reverify_assets.cli.main import build_parser
from reverify_assets.defs.resources import RescoringResource
from reverify_assets.errors import StateError
from reverify_assets.run.options import RunFlags, RunOptions
from reverify_assets.run.startup_handoff import StartupHandoff
from reverify_assets.run.verification import VerifyStep


def run_parser() -> argparse.ArgumentParser:
    subparsers = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return subparsers.choices["run"]


def test_every_described_field_is_an_option_of_reverify_run_with_its_description_as_help() -> None:
    helps = {action.dest: action.help for action in run_parser()._actions if action.dest != "help"}
    described = {name: field.description for name, field in RunOptions.model_fields.items() if field.description}
    assert helps == described


def test_a_parsed_command_line_is_the_options_it_names() -> None:
    files = [
        "--config",
        "a.yaml",
        "--config",
        "b.yaml",
        "--inputs",
        "i.jsonl",
        "--rollouts",
        "r.jsonl",
        "-o",
        "o.jsonl",
    ]
    args = run_parser().parse_args([*files, "--resume", "--limit", "5", "--max-cost", "2.5"])
    options = RunOptions(**{name: getattr(args, name) for name in RunOptions.model_fields if name != "overrides"})
    assert (options.config_paths, options.output_file, options.resume, options.limit, options.max_cost) == (
        ["a.yaml", "b.yaml"],
        Path("o.jsonl"),
        True,
        5,
        2.5,
    )
    assert (options.overwrite, options.concurrency, options.max_attempts) == (False, 64, None)


def test_the_run_config_of_a_run_holds_every_flag_with_its_description() -> None:
    schema = RescoringResource.to_config_schema().as_field().config_type.fields  # type: ignore[attr-defined]
    assert {name: schema[name].description for name in RunFlags.model_fields} == {
        name: field.description for name, field in RunFlags.model_fields.items()
    }


def test_the_verify_step_is_what_the_flags_ask() -> None:
    flags = RunFlags(
        inputs="i.jsonl", rollouts="r.jsonl", output="o.jsonl", resume=True, judge_failed_only=True, concurrency=8
    )
    step = VerifyStep.of(flags, responses=Path("recover.jsonl"))
    assert (step.inputs, step.responses, step.output, step.concurrency) == (
        Path("i.jsonl"),
        Path("recover.jsonl"),
        Path("o.jsonl"),
        8,
    )
    assert (step.policy.resume, step.policy.overwrite, step.skip_guard, step.policy.max_attempts) == (
        True,
        False,
        True,
        3,
    )


SECRET = "++judge.resources_servers.equivalence_judge.openai_api_key=sk-test-0123456789abcdef"
FILES = {"inputs": "i.jsonl", "rollouts": "r.jsonl", "output": "o.jsonl"}


def test_a_secret_override_is_kept_out_of_the_run_config_and_handed_to_the_commands_run(tmp_path: Path) -> None:
    from reverify_assets.processes import secrets as process_secrets

    process_secrets.remember(["sk-test-0123456789abcdef"])  # as loading a config that holds it does
    values = RescoringResource.config_values([tmp_path / "c.yaml"], [SECRET])
    assert values["overrides_redacted"] is True and "sk-test" not in str(values["overrides"])
    resource = RescoringResource(**FILES, **values)
    assert resource.given_overrides(StartupHandoff(given_overrides=[SECRET])) == [SECRET]
    with pytest.raises(StateError):  # a re-execution from the UI: nobody hands it the secret
        resource.given_overrides(StartupHandoff())


def test_a_run_config_recorded_before_overrides_redacted_still_loads_and_is_refused_the_same() -> None:
    recorded = {
        "config_paths": ["c.yaml"],
        "overrides": ["++x=[REDACTED]"],
        "secret_overrides_env": "REVERIFY_RUN_OVERRIDES",
    }
    resource = RescoringResource(**FILES, **recorded)
    with pytest.raises(StateError):
        resource.given_overrides(StartupHandoff())
