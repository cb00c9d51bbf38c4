"""The judge-call cache: its key, its file, and the built-in judge asking it before the judge."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestServer

from reverify_assets.errors import OutputError
from reverify_assets.judge_cache.store import (
    CACHE_FILE_NAME,
    CACHE_OFF,
    JUDGE_CACHE_ENV,
    JudgeCallCache,
    judge_cache_path,
    request_key,
)
from reverify_assets.rows.result_routing import Destination
from reverify_assets.rows.routed_row import routed
from reverify_assets.servers.judge.server import EquivalenceJudgeServer
from tests.support.scripted_judge import Reply, ScriptedJudge, completion, judge_config, run, status, verify_body

URL = "http://127.0.0.1:9/v1/chat/completions"
REQUEST = {"model": "m", "messages": [{"role": "user", "content": "Is 4 the same as four?"}], "temperature": 0.0}


@pytest.mark.parametrize(
    ("url", "request_body", "same"),
    [
        (URL, {"temperature": 0.0, "messages": REQUEST["messages"], "model": "m"}, True),  # key order is no matter
        ("http://127.0.0.1:10/v1/chat/completions", REQUEST, False),  # another endpoint
        (URL, REQUEST | {"model": "m2"}, False),
        (URL, REQUEST | {"messages": [{"role": "user", "content": "Is 4 the same as 4?"}]}, False),
        (URL, REQUEST | {"messages": [{"role": "system", "content": "Be strict."}, *REQUEST["messages"]]}, False),
        (URL, REQUEST | {"temperature": 0.7}, False),
        (URL, REQUEST | {"max_tokens": 16}, False),
        (URL, REQUEST | {"top_p": 0.9}, False),
    ],
)
def test_the_key_covers_the_endpoint_the_model_the_messages_and_the_sampling(
    url: str, request_body: dict[str, Any], same: bool
) -> None:
    assert (request_key("reply", url, request_body) == request_key("reply", URL, REQUEST)) is same


def test_kinds_of_reply_never_share_a_key() -> None:
    assert request_key("reply", URL, REQUEST) != request_key("http_body", URL, REQUEST)


@pytest.mark.parametrize(
    ("environment", "dagster_home", "expected"),
    [
        (CACHE_OFF, "/h", None),
        ("/elsewhere/cache.sqlite", "/h", Path("/elsewhere/cache.sqlite")),
        (None, "/h", Path("/h") / CACHE_FILE_NAME),
    ],
)
def test_where_the_cache_lives(
    monkeypatch: pytest.MonkeyPatch, environment: str | None, dagster_home: str, expected: Path | None
) -> None:
    if environment is None:
        monkeypatch.delenv(JUDGE_CACHE_ENV)
    else:
        monkeypatch.setenv(JUDGE_CACHE_ENV, environment)
    monkeypatch.setenv("DAGSTER_HOME", dagster_home)
    assert judge_cache_path() == expected


def test_entries_outlive_the_process_and_are_seen_by_another_connection(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "cache.sqlite"
    key = request_key("reply", URL, REQUEST)
    with JudgeCallCache(path) as first, JudgeCallCache(path) as second:
        assert first.get(key) is None
        first.put(key, b'{"text": "[[A=B]]"}')
        assert second.get(key) == b'{"text": "[[A=B]]"}'
        second.put(key, b'{"text": "[[A!=B]]"}')  # a newer answer replaces an older one
    with JudgeCallCache(path) as reopened:
        assert reopened.get(key) == b'{"text": "[[A!=B]]"}'


def test_a_file_that_is_no_cache_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "judge_cache.sqlite"
    path.write_bytes(b"this is not a database, it is a note\n" * 200)
    with pytest.raises(OutputError) as caught:
        JudgeCallCache(path)
    assert caught.value.path == path
    assert "run with --no-judge-cache" in str(caught.value)  # the way around it


def test_a_cache_that_cannot_be_written_still_answers_the_caller(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    with JudgeCallCache(path, busy_timeout_s=0.01) as cache:
        locker = sqlite3.connect(path, timeout=0)
        locker.execute("BEGIN EXCLUSIVE")  # another process holding the file for good
        cache.put(request_key("reply", URL, REQUEST), b"{}")  # warned about, not raised
        locker.rollback()
        locker.close()
        assert cache.get(request_key("reply", URL, REQUEST)) is None


# --- the built-in judge with a cache ----------------------------------------------------------------------


def judged_twice(
    cache: Path | None,
    replies: list[Reply],
    *,
    first_fields: dict[str, Any] | None = None,
    second_fields: dict[str, Any] | None = None,
) -> Any:
    """The same row verified by two servers in turn (two runs) with the judge-call cache ``cache``, against one
    scripted judge."""

    async def both() -> tuple[list[dict[str, Any]], ScriptedJudge]:
        judge = ScriptedJudge(replies)
        results = []
        async with TestServer(judge.app()) as test_server:
            for fields in (first_fields or {}, second_fields or {}):
                config = judge_config(str(test_server.make_url("")), **fields)
                server = EquivalenceJudgeServer(config, judge_cache=cache)
                await server.open()
                try:
                    results.append(await server.verify(verify_body()))
                finally:
                    await server.close()
        return results, judge

    return run(both())


@pytest.fixture
def cache_file(tmp_path: Path) -> Path:
    return tmp_path / "judge_cache.sqlite"


def test_a_second_run_is_answered_from_the_cache_and_says_so(tmp_path: Path, cache_file: Path) -> None:
    (first, second), judge = judged_twice(cache_file, [completion("[[A=B]]")])
    assert len(judge.requests) == 1
    assert first["reward"] == second["reward"] == 1.0
    assert "cached" not in first["judge_evaluations"][0]
    assert second["judge_evaluations"][0]["cached"] is True
    assert second["judge_evaluations"][0]["response"] == "[[A=B]]"
    assert [routed(row).judge_calls for row in (first, second)] == [1, 0]
    assert [routed(row).judge_cache_hits for row in (first, second)] == [0, 1]


def test_the_verdict_is_read_again_from_a_cached_reply(tmp_path: Path, cache_file: Path) -> None:
    """The reply is kept, not the verdict: other labels apply to it without a call."""
    replies = [completion("SAME")]
    (first, second), judge = judged_twice(cache_file, replies, first_fields={"judge_equal_label": "SAME"})
    assert len(judge.requests) == 1
    assert first["reward"] == 1.0 and second["reward"] == 0.0
    assert second["judge_evaluations"][0]["judgement_parsing_issues"] == ["no_verdict"]


@pytest.mark.parametrize(
    "reply",
    [
        completion("I cannot decide."),  # no verdict in it: another call may give one
        completion("[[A=B]] but then", finish_reason="length"),  # cut short
        completion(None),  # no text at all
    ],
)
def test_a_reply_without_a_whole_verdict_is_not_kept(tmp_path: Path, cache_file: Path, reply: Reply) -> None:
    _, judge = judged_twice(cache_file, [reply])
    assert len(judge.requests) == 2


def test_a_changed_prompt_asks_the_judge_again(tmp_path: Path, cache_file: Path) -> None:
    replies = [completion("[[A=B]]")]
    _, judge = judged_twice(cache_file, replies, second_fields={"judge_system_message": "Be strict."})
    assert len(judge.requests) == 2


def test_a_failed_call_is_not_kept(tmp_path: Path, cache_file: Path) -> None:
    (first, second), judge = judged_twice(cache_file, [status(401), completion("[[A=B]]")])
    assert first["_ng_failure_class"] == "judge_failed" and second["reward"] == 1.0
    assert len(judge.requests) == 2


def test_an_entry_this_version_cannot_read_is_asked_again_and_replaced(tmp_path: Path, cache_file: Path) -> None:
    judged_twice(cache_file, [completion("[[A=B]]")])
    with sqlite3.connect(cache_file) as db:
        db.execute("UPDATE judge_replies_v1 SET reply = ?", (b"[1, 2",))
    (third, fourth), judge = judged_twice(cache_file, [completion("[[A=B]]")])
    assert len(judge.requests) == 1  # the unreadable entry was asked again, the fresh one then answered
    assert "cached" not in third["judge_evaluations"][0] and fourth["judge_evaluations"][0]["cached"] is True


def test_with_the_cache_off_every_run_asks(tmp_path: Path) -> None:
    _, judge = judged_twice(None, [completion("[[A=B]]")])
    assert len(judge.requests) == 2
    assert not list(tmp_path.glob("**/*.sqlite"))


@pytest.mark.parametrize(
    ("row", "calls", "hits"),
    [
        ({"reward": 1.0}, 0, 0),
        ({"reward": 1.0, "judge_evaluations": []}, 0, 0),
        ({"reward": 1.0, "judge_evaluations": [{}, {"cached": True}]}, 1, 1),
        ({"reward": 1.0, "judge_evaluations": [{"cached": "yes"}]}, 1, 0),  # only `true` means cached
        ({"reward": 1.0, "judge_evaluations": "not a list"}, 0, 0),
        ({"reward": 0.0, "_ng_failure_class": "judge_failed", "judge_evaluations": [{}]}, 0, 0),  # not an output row
    ],
)
def test_the_judge_calls_of_a_row(row: dict[str, Any], calls: int, hits: int) -> None:
    made = routed(row)
    assert (made.judge_calls, made.judge_cache_hits) == (calls, hits)
    assert made.destination is (Destination.SIDECAR if "_ng_failure_class" in row else Destination.OUTPUT)
