"""The rollout health settings as ``gym eval aggregate`` takes them, the report lines, and the asset check."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from reverify_assets.defs.checks import rollout_health_result
from reverify_assets.errors import ConfigError
from reverify_assets.gym.rollout_health import HealthOutcome, RolloutHealth, health_settings, known_check_ids


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, ()),
        ("", ()),
        ("model_call_failed", ("model_call_failed",)),
        (" model_call_failed , record_unreadable,", ("model_call_failed", "record_unreadable")),
        (["record_unreadable", "record_unreadable"], ("record_unreadable",)),
    ],
)
def test_check_ids_are_taken_as_nemo_gym_takes_them(value: Any, expected: tuple[str, ...]) -> None:
    assert known_check_ids(value) == expected


@pytest.mark.parametrize(
    ("config", "key"),
    [
        ({"health_check_ignored_checks": "model_call_faild"}, "health_check_ignored_checks"),  # an unknown check
        ({"health_check_ignored_checks": 3}, "health_check_ignored_checks"),  # not check IDs
        ({"health_check_workers": 0}, "health_check_workers"),
        ({"disable_health_check": "sometimes"}, "disable_health_check"),
    ],
)
def test_a_bad_setting_names_its_key(config: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        health_settings(config)
    assert caught.value.key == key


def test_settings_default_to_nemo_gyms() -> None:
    settings = health_settings({"merge_shards": False})
    assert (settings.disable_health_check, settings.health_check_workers) == (False, None)
    assert settings.health_check_ignored_checks == ()


def health(unhealthy: int, ignored: list[str]) -> RolloutHealth:
    issues = {"model_call_failed": unhealthy, "agent_turn_hollow": 1, "record_unreadable": 0}
    run = {
        "verdicts": {"healthy": 3, "unhealthy": unhealthy, "unobserved": 2},
        "issues": issues,
        "ignored_checks": ignored,
    }
    return RolloutHealth(Path("/o/quality_summary.json"), Path("/o/rollout_verdicts.jsonl"), run)


@pytest.mark.parametrize(
    ("ignored", "first_line"),
    [
        ([], "Rollout health: 9 checked, 3 healthy, 4 unhealthy, 2 unobserved"),
        (["a", "b"], "Rollout health: 9 checked, 3 healthy, 4 unhealthy, 2 unobserved (ignored: a, b)"),
    ],
)
def test_the_report_is_nemo_gyms_format_health_report(ignored: list[str], first_line: str) -> None:
    assert health(4, ignored).report() == (first_line, "Quality summary: /o/quality_summary.json")


def test_findings_by_check_most_first_without_the_empty_ones() -> None:
    assert health(4, []).findings_by_check() == {"model_call_failed": 4, "agent_turn_hollow": 1}
    assert health(4, []).findings_by_check(1) == {"model_call_failed": 4}


@pytest.mark.parametrize(
    ("outcome", "passed", "description"),
    [
        (None, True, "not run: turned off (--no-health-check, disable_health_check)"),
        (
            HealthOutcome(("Rollout health: not checked: no NeMo Gym",)),
            True,
            "Rollout health: not checked: no NeMo Gym",
        ),
        (HealthOutcome(("it crashed",), failure="it crashed"), False, "it crashed"),
        (HealthOutcome(health(0, []).report(), health(0, [])), True, health(0, []).report()[0]),
        (HealthOutcome(health(2, []).report(), health(2, [])), False, health(2, []).report()[0]),
    ],
)
def test_the_asset_check_warns_on_unhealthy_rollouts_and_failed_checks(
    outcome: HealthOutcome | None, passed: bool, description: str
) -> None:
    result = rollout_health_result(outcome)
    assert (result.passed, result.description, result.severity.value) == (passed, description, "WARN")
