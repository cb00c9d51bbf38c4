"""Field names and the metric-name grammar NeMo Gym 0.7.0 uses in ``/aggregate_metrics`` answers."""

from __future__ import annotations

TASK_INDEX = "_ng_task_index"
ROLLOUT_INDEX = "_ng_rollout_index"
ATTEMPT_INDEX = "_ng_attempt_index"
MASK_SAMPLE = "mask_sample"
REWARD = "reward"
RESPONSE = "response"
USAGE = "usage"

# Every group entry's `sample`: the aggregate route profiles against one synthetic agent named "agent".
SYNTHETIC_AGENT_NAME = "agent"

SEPARATOR = "/"
ACROSS_REPEATS = "_across_repeats"

# Stat names, each used as the `<stat>/<field>` prefix.
MEAN = "mean"
MAX = "max"
MIN = "min"
MEDIAN = "median"
STD = "std"
SEM = "sem"
SE = "se"
P25 = "p25"
P75 = "p75"
CI_LOW_95 = "ci_low_95"
CI_HIGH_95 = "ci_high_95"
HISTOGRAM = "histogram"
ALL_STATS = (MEAN, MAX, MIN, MEDIAN, STD, SEM, SE, P25, P75, CI_LOW_95, CI_HIGH_95, HISTOGRAM)

# Companion statistics appended to a `pass@1[avg-of-k]/<score>` name.
STD_DEV_ACROSS_RUNS = "std_dev_across_runs"
STD_ERR_ACROSS_RUNS = "std_err_across_runs"
AVG_SAMPLE_STD_DEV = "avg_sample_std_dev"
PASS_MAJORITY_STATS = (STD_DEV_ACROSS_RUNS, STD_ERR_ACROSS_RUNS, AVG_SAMPLE_STD_DEV)


def stat_key(stat: str, field: str) -> str:
    """``mean/reward``."""
    return f"{stat}{SEPARATOR}{field}"


def across_repeats_key(stat: str, metric: str) -> str:
    """``se_across_repeats/mean/reward``: `stat` taken over the repeats' values of `metric`."""
    return f"{stat}{ACROSS_REPEATS}{SEPARATOR}{metric}"


_NOT_PRIMARY_PREFIXES = tuple(f"{stat}{SEPARATOR}" for stat in ALL_STATS if stat != MEAN)
_NOT_PRIMARY_SUFFIXES = (
    *(f"{SEPARATOR}{stat}" for stat in (MAX, MIN, MEDIAN, "p5", P25, P75, "p95", CI_LOW_95, CI_HIGH_95)),
    "/ci_lower",
    "/ci_upper",
    "_ci_lower",
    "_ci_upper",
    "_ci95_lower",
    "_ci95_upper",
    f"{SEPARATOR}{ATTEMPT_INDEX}",
    *(f"{SEPARATOR}{stat}" for stat in PASS_MAJORITY_STATS),
)
_NOT_PRIMARY_NAMES = frozenset(
    {
        TASK_INDEX,
        ROLLOUT_INDEX,
        ATTEMPT_INDEX,
        "sample_count",
        "missing_count",
        "num_repeats",
        "token_usage_version",
    }
)


def is_primary_metric(name: object) -> bool:
    """Whether `name` is a point estimate that is summarised across repeats (``mean/reward`` is,
    ``std/reward``, ``sample_count`` and ``mean/x/ci_low_95`` are not)."""
    return (
        isinstance(name, str)
        and name not in _NOT_PRIMARY_NAMES
        and not name.startswith(_NOT_PRIMARY_PREFIXES)
        and not name.endswith(_NOT_PRIMARY_SUFFIXES)
        and f"{ACROSS_REPEATS}{SEPARATOR}" not in name
    )
