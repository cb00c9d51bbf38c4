"""A verify result made into what is stored: stamped, routed, serialised once, and summed up for the tallies.

The verify loop does this for rows it sends one by one; a built-in server does it for rows sent to its
``/reverify_batch`` route, so the same row is written byte for byte whichever side made it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from reverify_assets.budget.token_estimate import token_counter
from reverify_assets.keys.rollout_keys import RolloutKey
from reverify_assets.rows.result_routing import (
    FAILURE_CLASS_FIELD,
    Destination,
    destination_of,
    stamp_result,
    verify_failure_row,
)
from reverify_assets.rows.row_fields import is_masked, numeric_reward


# Not frozen: one is made for every row, and a frozen dataclass's __init__ costs about three times as much.
@dataclass(slots=True)
class RoutedRow:
    destination: Destination
    line: bytes  # the JSONL line, newline-terminated; empty for a row that goes nowhere
    failure_class: str | None  # of a sidecar row
    reward: float | None
    masked: bool
    judge_calls: int = 0  # the verdicts of an output row a judge was asked for
    judge_cache_hits: int = 0  # and those the judge-call cache answered
    # The tokens of those calls, as the judge reported them (else the prompt estimated, see `_tokens_of`).
    judge_input_tokens: int = 0
    judge_output_tokens: int = 0


# A judge's verdicts on an output row (``judge_evaluations``, as NeMo Gym's judges write them); one taken from the
# judge-call cache cost no call, and says so: the built-in judge marks it ``"cached": true``, and a NeMo Gym judge
# stores the model's reply, which the cache's proxy marked in its ``metadata``.
JUDGE_EVALUATIONS_FIELD = "judge_evaluations"
CACHED_EVALUATION_FIELD = "cached"
CACHE_HIT_METADATA = "reverify_judge_cache"
USAGE_FIELD = "usage"  # the built-in judge's record of a call's chat completion usage
# What ``/reverify_batch`` says of a row's judge calls, named as the fields of RoutedRow.
JUDGE_SPEND_FIELDS = ("judge_calls", "judge_cache_hits", "judge_input_tokens", "judge_output_tokens")


def route_result(
    result: dict[str, Any], payload: dict[str, Any], key: RolloutKey, stamp: dict[str, str] | None
) -> RoutedRow:
    return routed(stamp_result(result, payload, key, stamp))


def route_verify_failure(
    payload: dict[str, Any], key: RolloutKey, reason: str, stamp: dict[str, str] | None
) -> RoutedRow:
    return routed(verify_failure_row(payload, key, reason, stamp))


def routed(row: dict[str, Any]) -> RoutedRow:
    destination = destination_of(row)
    made = RoutedRow(
        destination,
        b"" if destination is Destination.NOWHERE else orjson.dumps(row, option=orjson.OPT_APPEND_NEWLINE),
        row.get(FAILURE_CLASS_FIELD) if destination is Destination.SIDECAR else None,
        numeric_reward(row),
        is_masked(row),
    )
    evaluations = row.get(JUDGE_EVALUATIONS_FIELD) if destination is Destination.OUTPUT else None
    if isinstance(evaluations, list) and evaluations:
        for entry in evaluations:
            if _answered_by_cache(entry):
                made.judge_cache_hits += 1
                continue
            made.judge_calls += 1
            input_tokens, output_tokens = _tokens_of(entry)
            made.judge_input_tokens += input_tokens
            made.judge_output_tokens += output_tokens
    return made


def _answered_by_cache(evaluation: Any) -> bool:
    if not isinstance(evaluation, dict):
        return False
    if evaluation.get(CACHED_EVALUATION_FIELD) is True:
        return True
    response = evaluation.get("response")
    metadata = response.get("metadata") if isinstance(response, dict) else None
    return isinstance(metadata, dict) and metadata.get(CACHE_HIT_METADATA) == "hit"


def _tokens_of(evaluation: Any) -> tuple[int, int]:
    """A call's (input, output) tokens: as the built-in judge recorded the chat completion's usage, or as a NeMo
    Gym judge's stored Responses reply gives it; else its prompt estimated (``budget.token_estimate``), no output."""
    if not isinstance(evaluation, dict):
        return 0, 0
    usage = evaluation.get(USAGE_FIELD)
    if isinstance(usage, dict) and _counts(usage, "prompt_tokens", "completion_tokens"):
        return usage["prompt_tokens"], usage["completion_tokens"]
    response = evaluation.get("response")
    usage = response.get("usage") if isinstance(response, dict) else None
    if isinstance(usage, dict) and _counts(usage, "input_tokens", "output_tokens"):
        return usage["input_tokens"], usage["output_tokens"]
    request = evaluation.get("responses_create_params")
    texts = _request_texts(request) if isinstance(request, dict) else []
    return sum(token_counter().count(text) for text in texts), 0


def _counts(usage: dict[str, Any], *names: str) -> bool:
    return all(isinstance(usage.get(name), int) and not isinstance(usage.get(name), bool) for name in names)


def _request_texts(request: dict[str, Any]) -> list[str]:
    """The message texts of a chat completion (``messages``) or Responses API (``input``) request."""
    items = request.get("messages") or request.get("input")
    if isinstance(items, str):
        return [items]
    texts = []
    for item in items if isinstance(items, list) else []:
        content = item.get("content") if isinstance(item, dict) else None
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts += [part["text"] for part in content if isinstance(part, dict) and isinstance(part.get("text"), str)]
    return texts
