"""mcqa's two ``/aggregate_metrics`` hooks (NeMo Gym 0.7.0 ``resources_servers/mcqa``).

``aggregate_metrics(rows, compute_metrics=mcqa.compute_metrics, get_key_metrics=mcqa.get_key_metrics)``
is the mcqa server's answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reverify_assets.metrics.hooks import StreamingHook
from reverify_assets.metrics.pass_majority import PassMajority, highest_k_metrics

ANSWER_KEY = "extracted_answer"


def _start() -> PassMajority:
    # The default score, ``accuracy = reward``, is mcqa's.
    return PassMajority(answer_key=ANSWER_KEY)


compute_metrics = StreamingHook(
    _start,
    """pass@k / pass@1[avg-of-k] / majority@k of ``accuracy = reward``, voting on ``extracted_answer``
    (so ``no_answer`` is 1 where it is null); ``compute_metrics(tasks)`` or streamed task by task.""",
)


def get_key_metrics(agent_metrics: Mapping[str, Any]) -> dict[str, Any]:
    """``mean/reward``; the highest-k ``pass@1[avg-of-k]`` accuracy and no_answer, ``pass@k/no_answer`` and
    ``majority@k/accuracy``; then ``pass@1/accuracy``."""
    key: dict[str, Any] = {}
    if "mean/reward" in agent_metrics:
        key["mean/reward"] = agent_metrics["mean/reward"]
    key.update(highest_k_metrics(agent_metrics, "pass@1[avg-of-{k}]", score_names=["accuracy", "no_answer"]))
    key.update(highest_k_metrics(agent_metrics, "pass@{k}", score_names=["no_answer"]))
    key.update(highest_k_metrics(agent_metrics, "majority@{k}", score_names=["accuracy"]))
    if "pass@1/accuracy" in agent_metrics:
        key["pass@1/accuracy"] = agent_metrics["pass@1/accuracy"]
    return key
