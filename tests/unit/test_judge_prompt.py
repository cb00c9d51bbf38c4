"""The equivalence judge's text handling, without a judge: the prompt it is sent (template, question, candidate,
regex narrowing) and how its reply is read as a verdict."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from reverify_assets.servers.judge.config import EquivalenceJudgeConfig
from reverify_assets.servers.judge.prompt import (
    DEFAULT_PROMPT_TEMPLATE,
    check_template,
    fill_prompt,
    last_assistant_text,
    last_user_text,
    narrow,
)
from reverify_assets.servers.judge.verdict import (
    CONFLICTING,
    NO_VERDICT,
    REPEATED,
    TRUNCATED,
    UNPARSEABLE,
    Verdict,
    parse_verdict,
)
from tests.support.judge_rows import message

# --- verdict parsing ---------------------------------------------------------------------------------------

CUSTOM = {"equal_label": "CORRECT", "not_equal_label": "INCORRECT"}


@pytest.mark.parametrize(
    ("text", "labels", "verdict"),
    [
        ("some text [[A=B]] trailing", {}, Verdict("[[A=B]]", True)),
        ("My final verdict is different [[A!=B]]", {}, Verdict("[[A!=B]]", False)),
        ("[[ A = B ]]", {}, Verdict("[[A=B]]", True)),  # whitespace inside the markers
        ("[[A != B]]", {}, Verdict("[[A!=B]]", False)),
        ("[ [A=B] ]", {}, Verdict("[[A=B]]", True)),
        ("[[A=B]] then [[A!=B]]", {}, Verdict("[[A=B]]", True, (CONFLICTING,))),  # the first label wins
        ("[[A!=B]] then [[A=B]]", {}, Verdict("[[A!=B]]", False, (CONFLICTING,))),
        ("[[A=B]] [[A=B]]", {}, Verdict("[[A=B]]", True, (REPEATED,))),
        ("no label present", {}, Verdict(None, False, (NO_VERDICT,))),
        ("[[a=b]]", {}, Verdict(None, False, (NO_VERDICT,))),  # labels are case-sensitive, as NeMo Gym's find
        ("", {}, Verdict(None, False, (NO_VERDICT,))),
        (None, {}, Verdict(None, False, (UNPARSEABLE,))),
        # beyond the contract: NeMo Gym's labels are configurable, and INCORRECT never counts as CORRECT
        ("The answer is INCORRECT.", CUSTOM, Verdict("INCORRECT", False)),
        ("Initially CORRECT, finally INCORRECT", CUSTOM, Verdict("CORRECT", True, (CONFLICTING,))),
        ("yes", {"equal_label": "yes", "not_equal_label": "yes"}, Verdict("yes", False)),
    ],
)
def test_verdict_table(text: str | None, labels: dict[str, str], verdict: Verdict) -> None:
    assert parse_verdict(text, **labels) == verdict


@pytest.mark.parametrize(
    ("text", "issues"),
    [("[[A=B]]", ()), ("cut off mid-sentence", (TRUNCATED, NO_VERDICT)), (None, (TRUNCATED, UNPARSEABLE))],
)
def test_a_truncated_reply_is_flagged(text: str | None, issues: tuple[str, ...]) -> None:
    assert parse_verdict(text, truncated=True).issues == issues


# --- prompt assembly and extraction --------------------------------------------------------------------------


def test_the_default_template_fills_and_asks_for_both_labels() -> None:
    prompt = fill_prompt(DEFAULT_PROMPT_TEMPLATE, question="Q {x}?", expected_answer="{a}", generated_answer="b}")
    assert "[[A=B]]" in prompt and "[[A!=B]]" in prompt
    assert "<|Question|>\nQ {x}?" in prompt, "braces in the values are not placeholders"
    assert "<|Start of Answer A|>\n{a}\n<|End of Answer A|>" in prompt
    assert "<|Start of Answer B|>\nb}\n<|End of Answer B|>" in prompt


@pytest.mark.parametrize(
    ("template", "error"),
    [
        ("{expected_answer} vs {generated_answer}", None),
        ("{{literal}} {question}: {expected_answer} / {generated_answer}", None),
        ("{expected_answer} vs {generated_answer} in \\boxed{}", "other braces doubled"),
        ("{expected_answer} vs {candidate}", "placeholders"),
        ("{question} {expected_answer}", "lacks {generated_answer}"),
        ("{question}", "lacks {expected_answer}, {generated_answer}"),
    ],
)
def test_template_check(template: str, error: str | None) -> None:
    if error is None:
        check_template(template)
        return
    with pytest.raises(ValueError, match=error.replace("{", r"\{").replace("}", r"\}")):
        check_template(template)
    with pytest.raises(ValidationError):
        EquivalenceJudgeConfig(prompt_template=template)


@pytest.mark.parametrize(
    ("output", "text"),
    [
        ([message("  It is 4.  ")], "It is 4."),
        ([message("part one", "part two")], "part one\npart two"),  # parts joined with newlines
        ([message("earlier"), {"type": "reasoning", "summary": []}, message("later")], "later"),  # last message
        ([message("answer"), {"type": "function_call", "name": "f"}], "answer"),
        ([message("earlier"), message("   ")], ""),  # an empty last message is not replaced by an earlier one
        ([{"type": "message", "role": "assistant", "content": "plain string"}], "plain string"),
        ([message("user says", role="user")], ""),
        ([], ""),
    ],
)
def test_candidate_is_the_last_assistant_message(output: list[dict[str, Any]], text: str) -> None:
    assert last_assistant_text({"output": output}) == text


@pytest.mark.parametrize(
    ("params", "question"),
    [
        ({"input": [{"role": "user", "content": "first"}, {"role": "user", "content": " second "}]}, "second"),
        ({"input": [{"role": "system", "content": "sys"}, {"role": "user", "content": "q"}]}, "q"),
        (
            {
                "input": [
                    {"role": "user", "content": [{"type": "input_text", "text": "Which?"}, {"type": "input_image"}]}
                ]
            },
            "Which?",
        ),
        ({"input": "a plain string input"}, "a plain string input"),
        ({"input": []}, ""),
        (None, ""),
    ],
)
def test_question_is_the_last_user_message(params: Any, question: str) -> None:
    assert last_user_text(params) == question


@pytest.mark.parametrize(
    ("text", "pattern", "narrowed"),
    [
        ("Answer: 3\nAnswer: 4", r"Answer: ([^\n]*)", "4"),  # the last match
        ("Answer: 3\nAnswer: 4", r"Answer: (.*)", "3\nAnswer: 4"),  # DOTALL, as NeMo Gym: "." crosses lines
        ("x=1, y=2", r"(?:x|y)=(\d)", "2"),
        ("value 7", r"value \d", "value 7"),  # no group: the whole match
        ("nothing here", r"Answer: (.*)", "nothing here"),  # no match: the text
        ("bad", r"(", "bad"),  # invalid pattern: the text
        ("text", None, "text"),
    ],
)
def test_regex_narrowing(text: str, pattern: str | None, narrowed: str) -> None:
    assert narrow(text, pattern) == narrowed
