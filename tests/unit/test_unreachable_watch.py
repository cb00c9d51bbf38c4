"""A run whose first rows of a server all failed to connect stops, naming the server and the error, keeping them."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
import pytest

from reverify_assets.cli.summary import print_failure_causes
from reverify_assets.files.names import RunFiles
from reverify_assets.rows.result_routing import failure_message
from reverify_assets.run.unreachable_watch import ServerCannotConnect, UnreachableWatch
from reverify_assets.run.verify_loop import verify_plan
from reverify_assets.verifier.client import VerifyOutcome
from tests.unit.test_verify_loop import Pairs, plan

REFUSED = (
    "ClientConnectorError: Cannot connect to host 127.0.0.1:9 ssl:default [Connect call failed] (after 3 attempts)"
)
HTTP_503 = "HTTP 503 from the judge: overloaded (after 3 attempts)"


@pytest.mark.parametrize(
    ("rows", "stops_at"),
    [
        pytest.param([("a", REFUSED)] * 16, 16, id="sixteen refused: stop"),
        pytest.param([("a", REFUSED)] * 15, None, id="fifteen: not yet"),
        pytest.param([("a", None)] + [("a", REFUSED)] * 40, None, id="a scored row first: it connects"),
        pytest.param([("a", HTTP_503)] + [("a", REFUSED)] * 40, None, id="another failure first: it connects"),
        pytest.param([("a", REFUSED)] * 15 + [("b", None), ("a", REFUSED)], 17, id="another server's rows apart"),
        pytest.param([("a", "httpx.ConnectError: [Errno 111] Connection refused")] * 16, 16, id="httpx's words"),
        pytest.param([("a", "APIConnectionError: Connection error.")] * 16, 16, id="the OpenAI client's"),
    ],
)
def test_the_first_rows_of_a_server_decide(rows: list[tuple[str, str | None]], stops_at: int | None) -> None:
    watch = UnreachableWatch()
    for number, (server, message) in enumerate(rows, start=1):
        failure_class = None if message is None else "judge_failed"
        if number == stops_at:
            with pytest.raises(ServerCannotConnect) as caught:
                watch.settled(server, failure_class, message)
            assert caught.value.server == server
            return
        watch.settled(server, failure_class, message)
    assert stops_at is None


def test_a_failure_of_another_class_says_nothing_of_the_connection() -> None:
    watch = UnreachableWatch()
    for _ in range(40):  # a program's own error mentioning a refused connection
        watch.settled("a", "tool_error", REFUSED)
    assert not watch.watching("a")


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"_ng_failure_message": "HTTP 500: boom"}, "HTTP 500: boom"),
        ({"_ng_failure_judge_error": "judge\n  said\tno", "failure_reason": "x"}, "judge said no"),
        ({"failure_reason": "r" * 400}, "r" * 299 + "…"),
        ({"_ng_failure_message": "   ", "failure_reason": "the reason"}, "the reason"),
        ({"_ng_failure_message": 3}, None),
        (
            {"_ng_failure_class": "judge_failed", "_ng_failure_message": "old", "_ng_failure_judge_error": "new"},
            "new",
        ),
        ({"_ng_failure_class": "verify_failed", "_ng_failure_message": "its", "_ng_failure_judge_error": "x"}, "its"),
        ({}, None),
    ],
)
def test_a_failure_rows_message_is_one_short_line(row: dict, message: str | None) -> None:
    assert failure_message(row) == message


class RefusingJudge:
    """A resources server that answers, its judge refused: every row a judge_failed row."""

    def __init__(self) -> None:
        self.calls = 0

    async def verify(self, body: bytes) -> VerifyOutcome:
        self.calls += 1
        await asyncio.sleep(0)
        return VerifyOutcome({"reward": 0.0, "_ng_failure_class": "judge_failed", "_ng_failure_judge_error": REFUSED})


def test_the_loop_stops_early_and_keeps_every_row_that_settled(tmp_path: Path) -> None:
    files = RunFiles.for_output(tmp_path / "out.jsonl")
    judge = RefusingJudge()
    with pytest.raises(ServerCannotConnect) as caught:
        asyncio.run(verify_plan(plan(1000), Pairs(), {"s": judge}, files, {"s": {}}, concurrency=4))
    assert caught.value.server == "s"
    kept = [orjson.loads(line) for line in files.sidecar.read_bytes().splitlines()]
    assert len(kept) >= 16 and judge.calls < 100, "stopped at the first rows, not after every row's retries"
    assert all(row["_ng_failure_class"] == "judge_failed" for row in kept)
    assert len({row["_ng_task_index"] for row in kept}) == len(kept), "each row once"


def test_the_causes_printed_are_the_commonest_each_with_its_first_message(capsys: pytest.CaptureFixture) -> None:
    by_class = {"verify_failed": 2, "judge_failed": 9, "a": 1, "b": 1, "c": 1, "d": 1}
    print_failure_causes(by_class, {"judge_failed": REFUSED, "verify_failed": "HTTP 500: boom"})
    assert capsys.readouterr().out.splitlines() == [
        "Top failure causes:",
        f"  9 judge_failed: {REFUSED}",
        "  2 verify_failed: HTTP 500: boom",
        "  1 a: (no message)",
        "  1 b: (no message)",
        "  1 c: (no message)",
        "  … and 1 more class",
    ]
