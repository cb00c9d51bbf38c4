"""The ``/verify`` request built from a joined (materialized input, rollout) pair, as NeMo Gym builds it."""

from __future__ import annotations

from typing import Any

from reverify_assets.errors import InputError
from reverify_assets.keys.rollout_keys import RolloutKey, describe_key

# Fields of the rollout that travel with the response; the old reward and stamps never do.
ROLLOUT_FIELDS_KEPT = ("deliverables_dir", "reference_ids")
TASKSET_ONLY_FIELDS = ("task_id", "task_input")


def build_verify_payload(input_row: dict[str, Any], rollout_row: dict[str, Any], key: RolloutKey) -> dict[str, Any]:
    if not has_response(rollout_row):
        raise InputError(missing_response_message(rollout_row, key), key=describe_key(key))
    task_input = input_row.get("task_input")
    payload = _flatten_taskset_row(input_row, task_input, key) if isinstance(task_input, dict) else dict(input_row)
    for field in ROLLOUT_FIELDS_KEPT:
        if field in rollout_row:
            payload[field] = rollout_row[field]
    payload["response"] = rollout_row["response"]
    return payload


def has_response(rollout_row: dict[str, Any]) -> bool:
    """``"response": null`` is no more a response than a missing field: there is nothing to grade."""
    return rollout_row.get("response") is not None


def missing_response_message(rollout_row: dict[str, Any], key: RolloutKey) -> str:
    result_type = rollout_row.get("_ng_result_type", "unknown")
    return f"rollout {describe_key(key)} of result type {result_type!r} has no `response`, which reverification needs"


def _flatten_taskset_row(row: dict[str, Any], task_input: dict[str, Any], key: RolloutKey) -> dict[str, Any]:
    """A materialized-taskset row: its own fields, then ``task_data``, then the rest of ``task_input``."""
    payload = {name: value for name, value in row.items() if name not in TASKSET_ONLY_FIELDS}
    task_data = task_input.get("task_data") or {}
    if not isinstance(task_data, dict):
        raise InputError(
            f"input row {describe_key(key)}: `task_input.task_data` must be an object", key=describe_key(key)
        )
    extra = {name: value for name, value in task_input.items() if name != "task_data"}
    for source in (task_data, extra):
        for name, value in source.items():
            if name in payload and payload[name] != value:
                raise InputError(
                    f"input row {describe_key(key)}: field {name!r} has different values inside and outside "
                    "`task_input`",
                    key=describe_key(key),
                )
            payload[name] = value
    return payload
