"""The aggregate's one_verifier_config check: passes only when every merged row carries the current config."""

from __future__ import annotations

from collections import Counter

import pytest

from reverify_assets.defs.checks import one_config_result
from reverify_assets.run.output_summary import UNKNOWN_PROVENANCE, OutputSummary


@pytest.mark.parametrize(
    ("rows_by_config", "passed", "described"),
    [
        ({"new": 5}, True, "all 5 merged rows were scored by the current verifier config new"),
        ({"old": 5}, False, "of 5 merged rows, 5 by old; the current verifier config is new"),
        ({"new": 3, "old": 2}, False, "of 5 merged rows, 2 by old; the current verifier config is new"),
        ({"new": 1, UNKNOWN_PROVENANCE: 1}, False, f"of 2 merged rows, 1 by {UNKNOWN_PROVENANCE}; the current"),
    ],
)
def test_one_config_check(rows_by_config: dict[str, int], passed: bool, described: str) -> None:
    summary = OutputSummary(rows=sum(rows_by_config.values()), rows_by_config=Counter(rows_by_config))
    result = one_config_result(summary, "new")
    assert result.passed is passed
    assert result.description is not None and result.description.startswith(described)
