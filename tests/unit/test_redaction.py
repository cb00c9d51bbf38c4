"""Redacting secrets: each secret, and any run of 8 or more of its characters, in text, lines and log records."""

from __future__ import annotations

import io
import logging
import os
import time

import orjson
import pytest

from reverify_assets.config.topology import read_topology
from reverify_assets.processes import secrets as process_secrets
from reverify_assets.processes.redaction import REDACTED, Redactor
from reverify_assets.run.config_secrets import config_secrets

KEY = "sk-proj-Zq8Lw3Xv7Nc2Rb5Ty1Mk4Hd9Gf6Js0Pa1"  # 41 characters, as in the issue
OTHER = "sk-other-0123456789abcdefghij"
SHORT = "pa55wd"  # under 8 characters: redacted only whole
UNICODE = "clé-секрет-🔑-μυστικό-42"
R = REDACTED


def runs_of(secret: str, text: str) -> list[str]:
    """Each 8-character run of ``secret`` that ``text`` still holds."""
    return [secret[i : i + 8] for i in range(len(secret) - 7) if secret[i : i + 8] in text]


@pytest.mark.parametrize(
    ("secrets", "text", "expected"),
    [
        ([KEY], f"Bearer {KEY}", f"Bearer {R}"),
        ([KEY], f"Incorrect API key provided: {KEY[:-4]}****.", f"Incorrect API key provided: {R}****."),
        ([KEY], f"key {KEY[:8]}{'*' * 29}{KEY[-4:]} refused", f"key {R}{'*' * 29}{KEY[-4:]} refused"),
        ([KEY], f"key sk-...{KEY[-4:]} refused", f"key sk-...{KEY[-4:]} refused"),  # 4 characters say nothing
        ([KEY], f"prefix {KEY[:8]}!", f"prefix {R}!"),
        ([KEY], f"middle {KEY[17:25]}!", f"middle {R}!"),
        ([KEY], f"seven {KEY[:7]} and {KEY[20:27]}", f"seven {KEY[:7]} and {KEY[20:27]}"),
        ([KEY], f"{KEY}{KEY}", R),  # touching runs are one
        ([KEY], f"{KEY[:12]}{KEY[6:20]}", R),  # a run, then another that repeats part of it
        ([KEY], f"a {KEY[3:15]} b {KEY[25:]} c", f"a {R} b {R} c"),
        ([KEY, OTHER], f"{KEY[30:]}{OTHER[:10]} and {OTHER}", f"{R} and {R}"),
        ([KEY[10:30], KEY], f"{KEY[5:35]}", R),  # one secret's run overlaps another's
        ([SHORT], f"password {SHORT}, {SHORT[:5]}, x{SHORT}y", f"password {R}, {SHORT[:5]}, x{R}y"),
        ([UNICODE], f"«{UNICODE[3:11]}» and «{UNICODE[3:10]}»", f"«{R}» and «{UNICODE[3:10]}»"),
        ([UNICODE], UNICODE, R),
        ([KEY], "", ""),
        ([], f"no secrets: {KEY}", f"no secrets: {KEY}"),
        ([None, ""], f"no secrets: {KEY}", f"no secrets: {KEY}"),
    ],
)
def test_each_run_of_eight_characters_of_a_secret_is_redacted(
    secrets: list[str | None], text: str, expected: str
) -> None:
    assert Redactor(secrets)(text) == expected


@pytest.mark.parametrize("secret", [KEY, OTHER, UNICODE, "a" * 40, "abababababababab", "0123456789"])
def test_no_run_survives_anywhere_in_a_text(secret: str) -> None:
    """Every run of 8 to all characters, at every place of a longer text: none of it is left."""
    redact = Redactor([secret])
    for length in range(8, len(secret) + 1):
        for start in range(len(secret) - length + 1):
            for text in (secret[start : start + length], f"x{secret[start : start + length]}yz", f"é {secret} é"):
                assert runs_of(secret, redact(text)) == [], (start, length, text)


def test_text_without_a_secret_is_handed_back_as_it_is() -> None:
    text = "an error body that quotes nothing secret " * 100
    assert Redactor([KEY])(text) is text


def test_a_line_is_redacted_and_stays_json() -> None:
    row = {"_ng_failure_judge_error": f"HTTP 401 from the judge: key {KEY[:-4]}**** ({UNICODE}) refused", "x": "é"}
    line = orjson.dumps(row, option=orjson.OPT_APPEND_NEWLINE)
    redacted = Redactor([KEY, UNICODE]).line(line)
    assert orjson.loads(redacted) == {
        "_ng_failure_judge_error": f"HTTP 401 from the judge: key {R}**** ({R}) refused",
        "x": "é",
    }
    assert redacted.endswith(b"\n")
    clean = orjson.dumps({"reward": 1.0}) + b"\n"
    assert Redactor([KEY]).line(clean) is clean


def test_a_long_body_is_scanned_in_about_linear_time() -> None:
    """10 MB of text with a leak at its end: a fraction of a second, not the minutes a per-window scan takes."""
    body = ("0123456789abcdefghij sk-proj- Zq8L " * 300_000) + KEY[1:-1]
    started = time.perf_counter()
    redacted = Redactor([KEY])(body)
    took = time.perf_counter() - started
    assert redacted.endswith(R) and runs_of(KEY, redacted) == []
    assert took < 10, f"{took:.1f} s"  # about 0.3 s here; the limit leaves room for a loaded machine


def test_the_redactor_never_shows_its_secrets() -> None:
    assert KEY[:8] not in repr(Redactor([KEY])) and KEY[:8] not in str(Redactor([KEY]))


def test_log_records_of_any_logger_are_redacted_once_the_process_holds_the_secret() -> None:
    secret = "sk-log-test-5f1c2e9a7b3d4c6e8f0a"
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    parent = logging.getLogger("tests.redaction")
    parent.addHandler(handler)
    child = logging.getLogger("tests.redaction.child")  # logs through its parent's handler
    try:
        process_secrets.remember([secret])
        child.warning("the judge said %s", f"bad key {secret[:-4]}****")
        try:
            raise RuntimeError(f"401: {secret}")
        except RuntimeError:
            child.exception("call failed")
        child.error("stack", stack_info=True, extra={"note": secret})
    finally:
        parent.removeHandler(handler)
    said = stream.getvalue()
    assert runs_of(secret, said) == []
    assert f"bad key {R}****" in said and f"RuntimeError: 401: {R}" in said and "call failed" in said


def test_the_process_redactor_covers_lines_and_messages_once_a_secret_is_remembered() -> None:
    secret = "sk-process-test-a1b2c3d4e5f6g7h8"
    process_secrets.remember([secret, None])
    redact_line = process_secrets.line_redactor()
    assert redact_line is not None
    assert redact_line(orjson.dumps({"e": secret[2:]})) == orjson.dumps({"e": R})
    assert process_secrets.redact(f"x {secret[5:15]} y") == f"x {R} y"


def test_the_secrets_of_a_config_are_its_key_fields_and_each_judge_key_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("JUDGE_API_KEY", "judge-default-key")
    monkeypatch.setenv("MY_JUDGE_KEY", "my-judge-key-value")
    monkeypatch.delenv("UNSET_JUDGE_KEY", raising=False)
    config = {
        "policy_api_key": "sk-policy-key",
        "placeholder_api_key": "none",  # too short to be a key: redacting "none" from every row would mangle them
        "empty_api_key": "",
        "policy_model": {"responses_api_models": {"openai_model": {"openai_api_key": "sk-model-key", "model": "m"}}},
        "default_judge": {"resources_servers": {"equivalence_judge": {"judge_model": "m"}}},
        "my_judge": {"resources_servers": {"equivalence_judge": {"api_key_env": "MY_JUDGE_KEY"}}},
        "keyless_judge": {"resources_servers": {"equivalence_judge": {"api_key_env": None}}},
        "unset_judge": {"resources_servers": {"equivalence_judge": {"api_key_env": "UNSET_JUDGE_KEY"}}},
        "mcqa": {"resources_servers": {"mcqa": {"api_key_env": "MY_JUDGE_KEY", "items": [{"api_key": "sk-list-key"}]}}},
        "agent": {"responses_api_agents": {"simple_agent": {"resources_server": "mcqa"}}},
    }
    assert sorted(config_secrets(config, read_topology(config))) == sorted(
        ["sk-policy-key", "sk-model-key", "sk-list-key", "judge-default-key", "my-judge-key-value"]
    )
    assert os.environ["MY_JUDGE_KEY"] == "my-judge-key-value"
