"""``/reverify_batch``: built-in servers score stored rows and answer the lines to store, byte for byte the
lines the CLI makes of a ``/verify`` answer; the client maps results and lines back to their rows."""

from __future__ import annotations

from collections import Counter
from typing import Any

import orjson
import pytest
from aiohttp import web

from reverify_assets.rows.payload import build_verify_payload
from reverify_assets.rows.result_routing import Destination
from reverify_assets.rows.routed_row import route_result
from reverify_assets.servers.app import build_app
from reverify_assets.servers.protocol import MAX_BATCH_ROWS, BadVerifyRequest, ResourcesServer
from reverify_assets.verifier.client import Route, StoredRowOutcome
from tests.support.app_client import client_for, run

STAMP = {"config_hash": "abc123", "server": "s", "type": "scripted", "reverify_mode": "stateless"}


class ScriptedServer(ResourcesServer):
    """The input row's ``do`` picks the answer; ``flaky`` raises on its first attempt only."""

    def __init__(self) -> None:
        self.attempts: Counter[int] = Counter()

    async def verify(self, body: dict[str, Any]) -> dict[str, Any]:
        task = body["_ng_task_index"]
        self.attempts[task] += 1
        answer = {"response": body["response"], "reward": 1.0, "note": "ünïcode ✓"}
        match body["do"]:
            case "bad":
                raise BadVerifyRequest(f"row {task} is malformed")
            case "boom":
                raise RuntimeError("grader crashed")
            case "flaky" if self.attempts[task] == 1:
                raise RuntimeError("first try fails")
            case "masked":
                answer["mask_sample"] = True
            case "judge_failed":
                answer |= {"reward": 0.0, "_ng_failure_class": "judge_failed"}
            case "no_persist":
                answer["_ng_no_persist"] = True
        return answer


def stored_pair(task: int, action: str) -> tuple[dict[str, Any], dict[str, Any]]:
    key = {"_ng_task_index": task, "_ng_rollout_index": 0}
    input_row = {**key, "do": action, "agent_ref": {"name": "agent"}, "expected_answer": "B"}
    rollout_row = {**key, "response": {"output_text": f"answer {task}"}, "reward": 0.0, "mask_sample": False}
    return input_row, rollout_row


def stored_row(task: int, input_row: Any, rollout_row: Any) -> bytes:
    return b"[%d,0,%b,%b]" % (task, orjson.dumps(input_row), orjson.dumps(rollout_row))


ACTIONS = ["ok", "flaky", "masked", "judge_failed", "no_persist", "bad", "boom"]


def test_each_stored_row_is_stored_as_the_cli_would_store_its_verify_answer() -> None:
    """One batch of every kind of row: the lines and their order match what the CLI makes of /verify."""

    async def test() -> None:
        server = ScriptedServer()
        pairs = [stored_pair(task, action) for task, action in enumerate(ACTIONS)]
        async with client_for(build_app(server)) as client:
            assert await client.route() == (Route.STORED_ROWS, MAX_BATCH_ROWS)
            stored = await client.reverify_batch(
                [stored_row(task, *pair) for task, pair in enumerate(pairs)], orjson.dumps(STAMP)
            )
            payloads = [build_verify_payload(*pair, (task, 0)) for task, pair in enumerate(pairs)]
            classic = [await client.verify(orjson.dumps(payload)) for payload in payloads]
        for task, (outcome, verify_outcome) in enumerate(zip(stored, classic, strict=True)):
            if verify_outcome.result is None:
                # Both failed: /verify's error is aiohttp's own page or the server's detail, not the batch's text.
                assert outcome.routed is None and not outcome.stale and outcome.error and verify_outcome.error
                continue
            assert outcome.routed == route_result(verify_outcome.result, payloads[task], (task, 0), STAMP)
            assert (outcome.stored_reward, outcome.stored_masked, outcome.error) == (0.0, False, None)
        by_action = dict(zip(ACTIONS, stored, strict=True))
        assert by_action["ok"].routed is not None and by_action["ok"].routed.destination is Destination.OUTPUT
        assert orjson.loads(by_action["ok"].routed.line)["reverify_provenance"] == STAMP
        assert by_action["masked"].routed is not None and by_action["masked"].routed.masked
        judged = by_action["judge_failed"].routed
        assert judged is not None
        assert (judged.destination, judged.failure_class) == (Destination.SIDECAR, "judge_failed")
        assert by_action["no_persist"].routed is not None and by_action["no_persist"].routed.line == b""
        assert by_action["bad"].error == 'HTTP 422: "row 5 is malformed"'
        assert by_action["boom"].error == 'HTTP 500: "RuntimeError: grader crashed" (after 3 attempts)'
        assert server.attempts[ACTIONS.index("ok")] == 2, "once per route: settled rows are never sent again"

    run(test)


@pytest.mark.parametrize(
    ("input_row", "rollout_row", "detail"),
    [
        (
            {"_ng_task_index": 0, "_ng_rollout_index": 0, "do": "ok"},
            {"_ng_task_index": 0, "_ng_rollout_index": 1, "response": {}},
            "the rollout row is not the row of (task 0, rollout 0)",
        ),
        (
            {"_ng_task_index": 0, "_ng_rollout_index": True, "do": "ok"},
            {"_ng_task_index": 0, "_ng_rollout_index": 0, "response": {}},
            "the input row is not the row of (task 0, rollout 0)",
        ),
        (
            [1, 2],
            {"_ng_task_index": 0, "_ng_rollout_index": 0, "response": {}},
            "the input row of (task 0, rollout 0) is not a JSON object",
        ),
        (
            {"_ng_task_index": 0, "_ng_rollout_index": 0, "do": "ok"},
            {"_ng_task_index": 0, "_ng_rollout_index": 0, "_ng_result_type": "error"},
            "rollout (task 0, rollout 0) of result type 'error' has no `response`",
        ),
    ],
)
def test_rows_that_make_no_verify_request_for_their_key_are_stale_and_never_graded(
    input_row: Any, rollout_row: Any, detail: str
) -> None:
    async def test() -> None:
        server = ScriptedServer()
        async with client_for(build_app(server)) as client:
            ok, stale = await client.reverify_batch(
                [stored_row(1, *stored_pair(1, "ok")), stored_row(0, input_row, rollout_row)], b"null"
            )
        assert ok.routed is not None and "reverify_provenance" not in orjson.loads(ok.routed.line)
        assert stale.stale and stale.routed is None and detail in (stale.error or "")
        assert server.attempts == Counter({1: 1})

    run(test)


def test_oversized_and_malformed_requests_are_refused_whole() -> None:
    async def test() -> None:
        async with client_for(build_app(ScriptedServer())) as client:
            rows = [stored_row(task, *stored_pair(task, "ok")) for task in range(MAX_BATCH_ROWS + 1)]
            too_many = await client.reverify_batch(rows, b"null")
            assert {outcome.error for outcome in too_many} == {
                f'HTTP 413: {{"detail":"at most {MAX_BATCH_ROWS} rows per batch"}}'
            }
            # A stored line that is not JSON spoils the whole request: each row is then read by the CLI.
            broken = await client.reverify_batch([stored_row(0, *stored_pair(0, "ok")), b"[1,0,{,}]"], b"null")
            assert {(outcome.error or "")[:34] for outcome in broken} == {"HTTP 400: request body is not JSON"}
            for body in (b'{"rows": 3}', b'{"rows": [], "stamp": 3}'):
                async with client.session.post(f"{client.base_url}/reverify_batch", data=body) as reply:
                    assert reply.status == 422

    run(test)


OUTPUT_RESULT = b'{"status":200,"destination":"output","reward":1}'


@pytest.mark.parametrize(
    ("reply", "rows"),
    [
        (b'{"results":[%b]}\n' % OUTPUT_RESULT, 1),  # the line is missing
        (b'{"results":[%b,%b,%b]}\n{"a":1}\n' % ((OUTPUT_RESULT,) * 3), 3),  # lines missing after the first
        (b'{"results":[{"status":200,"destination":"nowhere"}]}\n{"extra":1}\n', 1),  # a line too many
        (b'{"results":[{"status":200,"destination":"elsewhere"}]}\n', 1),
        (b'{"results":[]}\n', 1),
        (b"not json\n", 1),
    ],
)
def test_a_reply_whose_results_and_lines_do_not_match_fails_its_rows(reply: bytes, rows: int) -> None:
    async def answer(_: web.Request) -> web.Response:
        return web.Response(body=reply, content_type="application/x-ndjson")

    app = web.Application()
    app.router.add_post("/reverify_batch", answer)

    async def test() -> None:
        async with client_for(app) as client:
            outcomes = await client.reverify_batch(
                [stored_row(task, *stored_pair(task, "ok")) for task in range(rows)], b"null"
            )
        for outcome in outcomes:
            assert outcome == StoredRowOutcome(error=outcome.error)
            assert (outcome.error or "").startswith("the reverify_batch reply is malformed")

    run(test)
