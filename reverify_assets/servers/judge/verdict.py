"""Reading the judge's verdict from its reply text.

The verdict is the *first* verdict label in the text (NeMo Gym's ``equivalence_llm_judge`` and
``math_with_judge`` before its parsing-diagnostics change; newer NeMo Gym takes the last). Whitespace inside
a label's punctuation is tolerated (``[[ A = B ]]``, ``[[A != B]]``), as NeMo Gym's
``normalize_math_judge_verdict`` canonicalises it. A reply without a label is a *wrong answer*, never a
failure: the judge was reached and answered.

The parsing issues are NeMo Gym's names, kept per evaluation so ``/aggregate_metrics`` can report how often
the judge's replies were hard to read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

EQUAL_LABEL = "[[A=B]]"
NOT_EQUAL_LABEL = "[[A!=B]]"

NO_VERDICT = "no_verdict"
CONFLICTING = "conflicting_verdicts"
REPEATED = "repeated_verdict"
TRUNCATED = "truncated_judge_output"
UNPARSEABLE = "unparseable_judge_output"


@dataclass(frozen=True, slots=True)
class Verdict:
    label: str | None  # the configured label found first, or None
    equal: bool
    issues: tuple[str, ...] = ()


def _label_regex(label: str) -> str:
    """A label as a regex in which whitespace may appear next to its punctuation."""
    parts: list[str] = []
    previous = ""
    for char in label:
        if char.isspace():
            if parts and parts[-1] != r"\s+":
                parts.append(r"\s+")
            previous = char
            continue
        if previous and not previous.isspace() and not (previous.isalnum() and char.isalnum()):
            parts.append(r"\s*")
        parts.append(re.escape(char))
        previous = char
    return "".join(parts)


@lru_cache(maxsize=16)
def _labels_pattern(equal_label: str, not_equal_label: str) -> re.Pattern[str] | None:
    # Longer label first: where both could start at one position (CORRECT inside INCORRECT), the longer wins
    # and is consumed, so it is never counted as the shorter one too.
    labels = sorted({label for label in (equal_label, not_equal_label) if label}, key=len, reverse=True)
    if not labels:
        return None
    return re.compile("|".join(f"({_label_regex(label)})" for label in labels))


def find_labels(text: str, equal_label: str = EQUAL_LABEL, not_equal_label: str = NOT_EQUAL_LABEL) -> list[str]:
    """The labels in the text, in text order, as their configured spelling."""
    pattern = _labels_pattern(equal_label, not_equal_label)
    if pattern is None:
        return []
    labels = sorted({label for label in (equal_label, not_equal_label) if label}, key=len, reverse=True)
    return [labels[match.lastindex - 1] for match in pattern.finditer(text) if match.lastindex]


def parse_verdict(
    text: str | None,
    *,
    equal_label: str = EQUAL_LABEL,
    not_equal_label: str = NOT_EQUAL_LABEL,
    truncated: bool = False,
) -> Verdict:
    if text is None:
        return Verdict(None, False, (TRUNCATED, UNPARSEABLE) if truncated else (UNPARSEABLE,))
    found = find_labels(text, equal_label, not_equal_label)
    if not found:
        return Verdict(None, False, (TRUNCATED, NO_VERDICT) if truncated else (NO_VERDICT,))
    issues: list[str] = []
    if len(set(found)) > 1:
        issues.append(CONFLICTING)
    if any(found.count(label) > 1 for label in set(found)):
        issues.append(REPEATED)
    label = found[0]
    # Identical labels could never tell equal from different: such a judge never says equal.
    return Verdict(label, label == equal_label and equal_label != not_equal_label, tuple(issues))
