"""Reverified rows carrying NeMo Gym's ``ng_trajectory`` capture, built to trip its rollout health checks.

NeMo Gym's bundled example rollouts carry no trajectory, so every check would be "unobserved" on them. These
rows hold one agent turn bound to one captured model call each, and vary what the call says: a healthy call,
zero completion tokens, a failed call (HTTP 500), a turn with no message, a trajectory NeMo Gym cannot read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

AGENT = "mcqa_simple_agent"


def trajectory(task: int, rollout: int, *, completion_tokens: int = 5, status: int = 200, answer: str = "B") -> dict:
    rollout_id = f"{task}-{rollout}"
    call_id = f"call-{rollout_id}"
    return {
        "schema_version": "1.0",
        "task_id": str(task),
        "rollout_id": rollout_id,
        "turns": [
            {
                "invocation_id": "root",
                "task_id": str(task),
                "rollout_id": rollout_id,
                "turn_no": 1,
                "timestamp": 1.0,
                "answer": answer,
                "step_count": 1,
                "model_calls": [{"model_call_id": call_id}],
            }
        ],
        "model_calls": [
            {
                "model_call_id": call_id,
                "started_at": 1.0,
                "response_metadata": {
                    "status_code": status,
                    **({"error_category": "server_error"} if status >= 400 else {}),
                },
                "token_stats": {"prompt_tokens": 10, "completion_tokens": completion_tokens},
            }
        ],
    }


def row(task: int, rollout: int, reward: float, ng_trajectory: Any) -> dict[str, Any]:
    return {
        "_ng_task_index": task,
        "_ng_rollout_index": rollout,
        "agent_ref": {"name": AGENT},
        "responses_create_params": {"input": [{"role": "user", "content": f"question {task}"}]},
        "response": {"output": []},
        "reward": reward,
        "ng_trajectory": ng_trajectory,
    }


def rows_with_findings() -> list[dict[str, Any]]:
    """Tasks 0-3, two rollouts each; task 1's are both unhealthy (``task_consistently_unhealthy``)."""
    return [
        row(0, 0, 1.0, trajectory(0, 0)),
        row(0, 1, 0.0, trajectory(0, 1, completion_tokens=0)),
        row(1, 0, 0.0, trajectory(1, 0, status=500)),
        row(1, 1, 0.0, trajectory(1, 1, answer="")),
        row(2, 0, 1.0, trajectory(2, 0)),
        row(2, 1, 1.0, {"task_id": "2"}),  # no rollout_id: NeMo Gym cannot read it (record_unreadable)
        row(3, 0, 1.0, None),  # no capture at all: every check unobserved
        row(3, 1, 0.0, trajectory(3, 1)),
    ]


def write_rows(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(item) + b"\n" for item in rows))
    return path
