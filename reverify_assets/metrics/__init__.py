"""NeMo Gym 0.7.0's ``/aggregate_metrics`` maths, as pure functions (no I/O, no HTTP) and a streaming form.

``aggregate_metrics(verify_responses, compute_metrics=..., get_key_metrics=...)`` is a resources server's
answer; ``baseline_metrics`` the answer of a server with no hooks; :mod:`.mcqa` holds mcqa's hooks.
``MetricsAccumulator`` builds the same answer from rows streamed in key order and writes it as JSON.
"""

from reverify_assets.metrics.accumulator import MetricsAccumulator
from reverify_assets.metrics.aggregate import aggregate_metrics, baseline_metrics, empty_answer
from reverify_assets.metrics.group_store import InMemoryGroups, SpooledGroups
from reverify_assets.metrics.hooks import StreamingHook, TaskReducer
from reverify_assets.metrics.pass_majority import (
    PassMajority,
    compute_pass_majority_metrics,
    compute_subset_metrics,
    highest_k_metrics,
)

__all__ = [
    "InMemoryGroups",
    "MetricsAccumulator",
    "PassMajority",
    "SpooledGroups",
    "StreamingHook",
    "TaskReducer",
    "aggregate_metrics",
    "baseline_metrics",
    "compute_pass_majority_metrics",
    "compute_subset_metrics",
    "empty_answer",
    "highest_k_metrics",
]
