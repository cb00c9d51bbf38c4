"""NeMo Gym's rollout health checks after an aggregate, as ``gym eval aggregate`` (0.7.0) runs them.

After the merge and the metrics, NeMo Gym checks every merged rollout (with ``merge_shards=false``, every shard)
with ``nemo_gym.rollout_health``: it writes ``quality_summary.json`` and ``rollout_verdicts.jsonl`` beside the
merged output and prints ``Rollout health: N checked, H healthy, U unhealthy, O unobserved`` and the summary's
path. Its settings are top-level keys of ``gym eval aggregate``'s config, which our flags set as its flags do:
``disable_health_check`` (``--no-health-check``), ``health_check_workers`` (``--health-check-workers``) and
``health_check_ignored_checks`` (``--health-check-ignore``).

The checks that run are NeMo Gym's own, by the NeMo Gym Python the servers would use
(``installation.find_python``), through ``rollout_health_runner.py``. They read NeMo Gym's ``ng_trajectory``
capture, a format NeMo Gym owns and is still extending: a port would be a second implementation, drifting from
the one users compare against. Without NeMo Gym the aggregate says once that the checks were not run, and how
to have them.

NeMo Gym writes the two reports into a scratch folder beside the output, and they are moved into place whole; the
reports of the aggregate before are removed first, so that a pair beside the output is this one's or none.
Checks that crash do not fail the aggregate: NeMo Gym logs the crash and keeps its artifacts, and so do we.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from reverify_assets.errors import ConfigError
from reverify_assets.files.atomic import move_into_place
from reverify_assets.files.names import ROLLOUT_VERDICTS
from reverify_assets.gym.installation import PYTHON_ENV, PYTHON_KEY, find_python
from reverify_assets.processes.lifelines import die_with_parent

log = logging.getLogger("reverify")

RUNNER = Path(__file__).with_name("rollout_health_runner.py")  # run by NeMo Gym's Python, not imported
CANNOT_READ, NOT_AVAILABLE = 3, 4  # the runner's exit statuses besides 0 and a crash's 1
QUALITY_SUMMARY = "quality_summary.json"
# NeMo Gym 0.7.0's CHECK_REGISTRY (nemo_gym/health/checks.py), in its order: --health-check-ignore is checked
# against it before anything runs, where NeMo Gym's own check would come only after the merge.
HEALTH_CHECK_IDS = (
    "check_execution_error",
    "record_unreadable",
    "rollout_duplicate_identity",
    "rollout_missing_agent_turns",
    "rollout_ended_on_failed_model_call",
    "agent_turn_hollow",
    "model_call_zero_completion_tokens",
    "model_call_missing_token_counts",
    "trajectory_capture_mismatch",
    "model_call_failed",
    "rollout_token_count_mismatch",
    "model_call_runaway_generation",
    "task_consistently_unhealthy",
    "task_no_successful_model_calls",
)
FAILED = "Rollout health checks failed after aggregation; aggregate artifacts are still available"  # NeMo Gym's
SETTINGS_KEYS = ("disable_health_check", "health_check_workers", "health_check_ignored_checks")
NOT_CHECKED = (
    "Rollout health: not checked: NeMo Gym's checks need its Python, and none was found (`gym` on PATH, "
    f"./.venv, ${PYTHON_ENV} or `{PYTHON_KEY}` in the config). Install nemo-gym 0.7.0 to have "
    "gym eval aggregate's quality_summary.json and rollout_verdicts.jsonl, or pass --no-health-check."
)


class HealthCheckSettings(BaseModel):
    """``gym eval aggregate``'s health-check settings, under NeMo Gym's names."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    disable_health_check: bool = False
    health_check_workers: int | None = Field(default=None, ge=1)
    health_check_ignored_checks: tuple[str, ...] = ()

    @field_validator("health_check_ignored_checks", mode="before")
    @classmethod
    def _known_checks(cls, value: Any) -> tuple[str, ...]:
        return known_check_ids(value)


def known_check_ids(value: Any) -> tuple[str, ...]:
    """Check IDs as NeMo Gym takes them (a list, or one comma-separated string), each once; an unknown one is a
    ValueError naming it and the known ones."""
    if value is None:
        return ()
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, list | tuple):
        raise ValueError(f"expected check IDs, comma-separated or a list, got {value!r}")
    checks = tuple(dict.fromkeys(str(check).strip() for check in value if str(check).strip()))
    unknown = sorted(set(checks) - set(HEALTH_CHECK_IDS))
    if unknown:
        raise ValueError(
            f"unknown rollout health check(s): {', '.join(unknown)} (NeMo Gym 0.7.0's: {', '.join(HEALTH_CHECK_IDS)})"
        )
    return checks


def health_settings(config: Mapping[str, Any]) -> HealthCheckSettings:
    """The settings in a verifier config's top level; a bad one is a config error naming its key."""
    values = {key: config[key] for key in SETTINGS_KEYS if key in config}
    if isinstance(ignored := values.get("health_check_ignored_checks"), Sequence) and not isinstance(ignored, str):
        values["health_check_ignored_checks"] = list(ignored)
    try:
        return HealthCheckSettings.model_validate(values)
    except ValidationError as exc:
        error = exc.errors()[0]
        key = ".".join(str(part) for part in error["loc"])
        raise ConfigError(f"config: {key}: {error['msg'].removeprefix('Value error, ')}", key=key) from exc


@dataclass(frozen=True)
class RolloutHealth:
    """What NeMo Gym's checks found: ``run`` is quality_summary.json's ``run`` block."""

    summary: Path
    verdicts: Path
    run: dict[str, Any]

    @property
    def counts(self) -> dict[str, int]:
        verdicts = self.run["verdicts"]
        return {"checked": sum(verdicts.values()), **verdicts}

    def findings_by_check(self, top: int | None = None) -> dict[str, int]:
        """Check IDs that found something, most findings first."""
        found = sorted(((count, check) for check, count in self.run["issues"].items() if count), reverse=True)
        return {check: count for count, check in found[:top]}

    def report(self) -> tuple[str, ...]:
        """NeMo Gym's ``format_health_report``, word for word."""
        counts, ignored = self.counts, self.run.get("ignored_checks") or []
        ignored_note = f" (ignored: {', '.join(ignored)})" if ignored else ""
        return (
            f"Rollout health: {counts['checked']} checked, {counts['healthy']} healthy, {counts['unhealthy']} "
            f"unhealthy, {counts['unobserved']} unobserved{ignored_note}",
            f"Quality summary: {self.summary}",
        )


@dataclass(frozen=True)
class HealthOutcome:
    lines: tuple[str, ...]  # what the command prints
    health: RolloutHealth | None = None  # None: not checked, or the checks failed
    failure: str | None = None  # the checks ran and failed: why, in one line


@dataclass(frozen=True)
class RolloutHealthCheck:
    """The checks an aggregate will run, settled before it starts: a bad setting or a ``nemo_gym_python`` that
    has no ``nemo_gym`` is said before anything is written."""

    settings: HealthCheckSettings
    python: Path | None  # None: no NeMo Gym here, the checks are not run

    @classmethod
    def for_config(cls, config: Mapping[str, Any]) -> RolloutHealthCheck | None:
        """None: the config turns the checks off."""
        settings = health_settings(config)
        if settings.disable_health_check:
            return None
        python, _ = find_python(config, Path.cwd(), [])
        return cls(settings, python)

    def run(self, rollouts: Sequence[Path], report_dir: Path) -> HealthOutcome:
        """NeMo Gym's checks of ``rollouts``, their reports written into ``report_dir``."""
        if self.python is None:
            return HealthOutcome((NOT_CHECKED,))
        report_dir = report_dir.absolute()
        for report in (report_dir / ROLLOUT_VERDICTS, report_dir / QUALITY_SUMMARY):
            report.unlink(missing_ok=True)  # of the aggregate before: they describe rows no longer there
        scratch = Path(tempfile.mkdtemp(prefix=".rollout-health-", dir=report_dir))
        try:
            return self._run(self.python, rollouts, report_dir, scratch)
        except OSError as exc:  # NeMo Gym's Python gone, a report that cannot be moved: the aggregate stands
            return _failed(
                f"Rollout health checks failed after aggregation; aggregate artifacts are still available ({exc})"
            )
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def _run(self, python: Path, rollouts: Sequence[Path], report_dir: Path, scratch: Path) -> HealthOutcome:
        request = {
            "paths": [str(path.absolute()) for path in rollouts],
            "output_dir": str(scratch),
            "workers": self.settings.health_check_workers,
            "ignored": list(self.settings.health_check_ignored_checks),
        }
        done = subprocess.run(
            [str(python), str(RUNNER)],
            input=json.dumps(request),  # on stdin: thousands of shard paths would pass the limit of one argument
            capture_output=True,
            text=True,
            check=False,
            cwd="/",  # the folder we run in must not shadow what NeMo Gym's Python imports
            preexec_fn=partial(die_with_parent, os.getpid()),  # its workers write into scratch for no one otherwise
        )
        said = done.stderr.strip().splitlines()
        last = said[-1] if said else f"exit status {done.returncode}"
        if done.returncode == NOT_AVAILABLE:
            return HealthOutcome((f"Rollout health: not checked: the NeMo Gym of {python}: {last}",))
        if done.returncode == CANNOT_READ:
            return _failed(f"Rollout health checks could not read the rollouts: {last}; the aggregate's files are kept")
        run = _run_block(done.stdout) if done.returncode == 0 else None
        if run is None:
            log.info("reverify: NeMo Gym's rollout health checks ended (status %d):\n%s", done.returncode, done.stderr)
            return _failed(f"{FAILED} ({last})")
        health = RolloutHealth(report_dir / QUALITY_SUMMARY, report_dir / ROLLOUT_VERDICTS, run)
        move_into_place(scratch / ROLLOUT_VERDICTS, health.verdicts)
        move_into_place(scratch / QUALITY_SUMMARY, health.summary)
        return HealthOutcome(health.report(), health)


def _failed(line: str) -> HealthOutcome:
    return HealthOutcome((line,), failure=line)


def _run_block(stdout: str) -> dict[str, Any] | None:
    lines = stdout.strip().splitlines()
    try:
        run = json.loads(lines[-1]) if lines else None
    except ValueError:
        return None
    return run if isinstance(run, dict) and isinstance(run.get("verdicts"), dict) else None
