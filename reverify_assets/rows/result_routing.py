"""Where a verify result goes (main output, failures sidecar, nowhere) and how it is stamped."""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Any

from reverify_assets.config.topology import ServerBlock
from reverify_assets.keys.rollout_keys import ROLLOUT_FIELD, TASK_FIELD, RolloutKey
from reverify_assets.rows.row_fields import is_mapping

FAILURE_CLASS_FIELD = "_ng_failure_class"
# Our own field, outside NeMo Gym's `_ng_` namespace: which verifier config scored the row.
PROVENANCE_FIELD = "reverify_provenance"
# The config of a row without provenance: scored by NeMo Gym's collection run, or by an older tool.
ORIGINAL_CONFIG = "original"
NO_PERSIST_FIELD = "_ng_no_persist"
# Copied from the verify payload onto the result only when the payload (the materialized input) has them.
PAYLOAD_STAMPS = ("agent_ref", "_ng_environment_server", "task_source", "skills_ref", "_ng_atif_provenance")


class Destination(Enum):
    OUTPUT = "output"
    SIDECAR = "sidecar"
    NOWHERE = "nowhere"  # absence from both files means "retry me" on resume


def destination_of(result: dict[str, Any]) -> Destination:
    if result.get(NO_PERSIST_FIELD):
        return Destination.NOWHERE
    if result.get(FAILURE_CLASS_FIELD):
        return Destination.SIDECAR
    return Destination.OUTPUT


def provenance(config_hash: str, server: ServerBlock, reverify_mode: str) -> dict[str, str]:
    return {"config_hash": config_hash, "server": server.instance, "type": server.type, "reverify_mode": reverify_mode}


def scoring_config(row: Mapping[str, Any]) -> str:
    """The verifier config hash that scored a row, or ``ORIGINAL_CONFIG`` when the row does not say."""
    stamp = row.get(PROVENANCE_FIELD)
    config = stamp.get("config_hash") if is_mapping(stamp) else None
    return config if isinstance(config, str) and config else ORIGINAL_CONFIG


def stamp_result(
    result: dict[str, Any], payload: dict[str, Any], key: RolloutKey, stamp: dict[str, str] | None = None
) -> dict[str, Any]:
    result[TASK_FIELD], result[ROLLOUT_FIELD] = key
    for field in PAYLOAD_STAMPS:
        if field in payload:
            result[field] = payload[field]
    if stamp is not None:
        result[PROVENANCE_FIELD] = stamp
    return result


def verify_failure_row(
    payload: dict[str, Any], key: RolloutKey, reason: str, stamp: dict[str, str] | None = None
) -> dict[str, Any]:
    """A sidecar row for a row whose ``/verify`` call never gave a usable answer; not terminal."""
    row = dict(payload)
    row[FAILURE_CLASS_FIELD] = "verify_failed"
    row["_ng_failure_message"] = reason
    return stamp_result(row, payload, key, stamp)


# Where a failure row says what went wrong: ours and NeMo Gym's verify failures, its judge errors, a server's reason.
FAILURE_MESSAGE_FIELDS = ("_ng_failure_message", "_ng_failure_judge_error", "failure_reason")
# A judge failure row is made from its request, which may still carry an earlier failure's message (a recovery
# re-judges sidecar rows): its own error comes first.
JUDGE_FAILURE_MESSAGE_FIELDS = ("_ng_failure_judge_error", "_ng_failure_message", "failure_reason")
SHOWN_FAILURE_MESSAGE_CHARS = 300


def failure_message(row: Mapping[str, Any]) -> str | None:
    """What a failure row says went wrong, on one line and short enough for a terminal."""
    judge_failed = row.get(FAILURE_CLASS_FIELD) == "judge_failed"
    for name in JUDGE_FAILURE_MESSAGE_FIELDS if judge_failed else FAILURE_MESSAGE_FIELDS:
        if isinstance(message := row.get(name), str) and (one_line := " ".join(message.split())):
            if len(one_line) > SHOWN_FAILURE_MESSAGE_CHARS:
                return one_line[: SHOWN_FAILURE_MESSAGE_CHARS - 1] + "…"
            return one_line
    return None


def run_label(row: dict[str, Any]) -> str | None:
    """The label NeMo Gym groups aggregate metrics by: environment server if stamped, else agent name."""
    env = row.get("_ng_environment_server")
    if isinstance(env, str) and env:
        return env
    return agent_name(row)


def agent_name(row: dict[str, Any]) -> str | None:
    agent = row.get("agent_ref")
    if isinstance(agent, dict) and isinstance(agent.get("name"), str):
        return agent["name"]
    return None
