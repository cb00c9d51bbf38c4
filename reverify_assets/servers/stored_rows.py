"""``/reverify_batch``: a built-in server re-scores stored rows and answers the lines to store.

The CLI already holds each row as two stored lines, its materialized input and its rollout. Building the verify
request itself, it parsed both, built and serialised the request, then parsed the answer and serialised it
again to stamp it: more than half the CLI's time went on those round trips. Here it sends the
two lines as they are, and the server, which parses its request anyway, builds the verify request as the
CLI would (``build_verify_payload``), grades it, stamps the result and answers the line to store
(``route_result``): each row is parsed once and serialised once, and the file holds the same bytes.

* ``GET /reverify_batch`` answers ``{"max_rows": N}``. A server without the route (NeMo Gym's) answers 404,
  and the CLI builds each verify request itself.
* ``POST /reverify_batch`` takes ``{"stamp": {...} | null, "rows": [[task, rollout, <input row>, <rollout
  row>], ...]}`` (at most N rows) and answers NDJSON: first ``{"results": [...]}``, one result per row in
  order, then the line to store of each result whose ``destination`` is ``output`` or ``sidecar``, in the
  same order. A result is ``{"status": 200, "destination", "reward", "masked", "failure_class",
  "stored_reward", "stored_masked"}``, with ``"judge_calls"``, ``"judge_cache_hits"``,
  ``"judge_input_tokens"`` and ``"judge_output_tokens"`` when a judge gave the row verdicts (see
  ``rows.routed_row``); ``{"status": 409, "detail"}`` when the two rows do not make a verify request for that
  key (the file changed after it was indexed, or a row names a key field twice); else what ``/verify`` would
  have answered, ``{"status": 422 | 500, "detail"}``.
"""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from reverify_assets.errors import InputError, ReverifyError
from reverify_assets.keys.rollout_keys import ROLLOUT_FIELD, TASK_FIELD, RolloutKey, describe_key
from reverify_assets.rows.payload import build_verify_payload
from reverify_assets.rows.routed_row import JUDGE_SPEND_FIELDS, route_result
from reverify_assets.rows.row_fields import is_masked, numeric_reward
from reverify_assets.rows.verifier_wire import STALE_PAIR
from reverify_assets.servers.protocol import (
    MAX_BATCH_ROWS,
    ResourcesServer,
    each_row,
    json_response,
    read_json_object,
    verify_one,
)

NDJSON = "application/x-ndjson"


def add_stored_rows_routes(app: web.Application, server: ResourcesServer) -> None:
    async def limits(_: web.Request) -> web.Response:
        return json_response({"max_rows": MAX_BATCH_ROWS})

    async def reverify_batch(request: web.Request) -> web.Response:
        body = await read_json_object(request)
        rows, stamp = body.get("rows"), body.get("stamp")
        if not isinstance(rows, list):
            return json_response({"detail": "`rows` must be a list of [task, rollout, input, rollout] rows"}, 422)
        if len(rows) > MAX_BATCH_ROWS:
            return json_response({"detail": f"at most {MAX_BATCH_ROWS} rows per batch"}, status=413)
        if stamp is not None and not isinstance(stamp, dict):
            return json_response({"detail": "`stamp` must be an object or null"}, status=422)
        answers = await each_row(server, (reverify_stored(server, row, stamp) for row in rows))
        head = orjson.dumps({"results": [result for result, _ in answers]}) + b"\n"
        return web.Response(body=head + b"".join(line for _, line in answers), content_type=NDJSON)

    app.router.add_get("/reverify_batch", limits)
    app.router.add_post("/reverify_batch", reverify_batch)


async def reverify_stored(
    server: ResourcesServer, item: Any, stamp: dict[str, str] | None
) -> tuple[dict[str, Any], bytes]:
    """One stored row's result and the line to store (empty unless it goes to the output or the sidecar)."""
    try:
        key, payload, rollout_row = stored_pair(item)
    except ReverifyError as exc:
        return {"status": STALE_PAIR, "detail": str(exc)}, b""
    answer = await verify_one(server, payload)
    if answer["status"] != 200:
        return answer, b""
    result = answer["response"]
    if "reward" not in result:
        shown = orjson.dumps(result)[:500].decode(errors="replace")
        return {"status": 500, "detail": f"the verify answer has no `reward`: {shown}"}, b""
    routed = route_result(result, payload, key, stamp)
    summary = {
        "status": 200,
        "destination": routed.destination.value,
        "reward": routed.reward,
        "masked": routed.masked,
        "failure_class": routed.failure_class,
        "stored_reward": numeric_reward(rollout_row),
        "stored_masked": is_masked(rollout_row),
    }
    if routed.judge_calls or routed.judge_cache_hits:
        summary |= {name: getattr(routed, name) for name in JUDGE_SPEND_FIELDS}
    return summary, routed.line


def stored_pair(item: Any) -> tuple[RolloutKey, dict[str, Any], dict[str, Any]]:
    """The key, verify request and rollout row of ``[task, rollout, input row, rollout row]``."""
    if not isinstance(item, list) or len(item) != 4:
        raise InputError("each row must be [task, rollout, input row, rollout row]")
    task, rollout, input_row, rollout_row = item
    if not (_is_index(task) and _is_index(rollout)):
        raise InputError("the task and rollout of a row must be integers")
    key = (task, rollout)
    for name, row in (("input", input_row), ("rollout", rollout_row)):
        if not isinstance(row, dict):
            raise InputError(f"the {name} row of {describe_key(key)} is not a JSON object", key=describe_key(key))
        found = (row.get(TASK_FIELD), row.get(ROLLOUT_FIELD))
        if not all(map(_is_index, found)) or found != key:
            raise InputError(f"the {name} row is not the row of {describe_key(key)}", key=describe_key(key))
    return key, build_verify_payload(input_row, rollout_row, key), rollout_row


def _is_index(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
