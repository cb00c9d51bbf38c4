"""The answer of NeMo Gym 0.7.0's ``POST /aggregate_metrics`` for a list of stripped verify responses.

Shape, in NeMo Gym's key order::

    {"group_level_metrics": [...], "agent_metrics": {...}, "key_metrics": {...},
     "perf_summary": {...} | None, "repeat_level_metrics": [...]}

:func:`aggregate_metrics` takes the rows in any order, as NeMo Gym's route does; how the answer is made,
and its streaming form for rows already in key order, are in :mod:`accumulator`.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from reverify_assets.metrics.accumulator import KeyMetricsHook, MetricsAccumulator
from reverify_assets.metrics.answer_parts import default_key_metrics, empty_answer
from reverify_assets.metrics.group_store import InMemoryGroups
from reverify_assets.metrics.hooks import Row, TasksHook

__all__ = ["aggregate_metrics", "baseline_metrics", "default_key_metrics", "empty_answer"]


def aggregate_metrics(
    verify_responses: Sequence[Row],
    *,
    compute_metrics: TasksHook | None = None,
    get_key_metrics: KeyMetricsHook | None = None,
    compute_repeat_metrics: TasksHook | None = None,
) -> dict[str, Any]:
    """What a NeMo Gym resources server with these hooks answers to ``{"verify_responses": ...}``.

    Raises ValueError when two scored rows share ``(_ng_task_index, _ng_rollout_index)``.
    """
    accumulator = MetricsAccumulator(
        compute_metrics=compute_metrics,
        get_key_metrics=get_key_metrics,
        compute_repeat_metrics=compute_repeat_metrics,
        groups=InMemoryGroups(),
    )
    with _cyclic_gc_paused():
        accumulator.add_all(verify_responses)
        return accumulator.answer()


@contextmanager
def _cyclic_gc_paused() -> Iterator[None]:
    """The answer grows by a few dicts per row next to the caller's rows, and each of Python's full
    collections would rescan them all (a quarter of the run's time) for cycles the aggregation never
    makes. Reference counting still frees everything; a hook's cycles wait for the next collection."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def baseline_metrics(verify_responses: Sequence[Row]) -> dict[str, Any]:
    """The answer of a server with no metric hooks: what we compute ourselves for a server that has no
    ``/aggregate_metrics``."""
    return aggregate_metrics(verify_responses)
