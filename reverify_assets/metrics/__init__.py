"""NeMo Gym 0.7.0's ``/aggregate_metrics`` maths, as pure functions (no I/O, no HTTP).

``aggregate_metrics(verify_responses, compute_metrics=..., get_key_metrics=...)`` is a resources server's
answer; ``baseline_metrics`` the answer of a server with no hooks; :mod:`.mcqa` holds mcqa's hooks.
"""

from reverify_assets.metrics.aggregate import aggregate_metrics, baseline_metrics, empty_answer
from reverify_assets.metrics.pass_majority import (
    add_avg_sample_std_dev,
    compute_pass_majority_metrics,
    compute_subset_metrics,
    highest_k_metrics,
)

__all__ = [
    "add_avg_sample_std_dev",
    "aggregate_metrics",
    "baseline_metrics",
    "compute_pass_majority_metrics",
    "compute_subset_metrics",
    "empty_answer",
    "highest_k_metrics",
]
