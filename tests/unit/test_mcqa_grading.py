"""mcqa grading rules, one table row per example of docs/nemo-gym-contract.md sections 4.1-4.3.

Rows marked "beyond the contract" pin NeMo Gym 0.7.0 behaviour read from its mcqa server that the contract
does not spell out.
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from reverify_assets.servers.mcqa.grading import (
    DEFAULT_ROW_GRADING_MODE,
    ROW_GRADING_MODES,
    SERVER_GRADING_MODES,
    Grade,
    MCQAInputError,
    effective_mode,
    grade,
    output_text,
    template_metadata_kwargs,
)

STRICT = "strict_single_letter_boxed"
LENIENT_BOXED = "lenient_boxed"
COLON = "lenient_answer_colon"
MD = "lenient_answer_colon_md"

OPTS_AD: list[dict[str, str | None]] = [{"A": "optA"}, {"B": "optB"}, {"C": "optC"}, {"D": "optD"}]
OPTS_AJ: list[dict[str, str | None]] = [{letter: f"option {letter} text"} for letter in "ABCDEFGHIJ"]
OPTS_TEXT: list[dict[str, str | None]] = [
    {"A": "A polygenic trait"},
    {"B": "Mitochondrial inheritance"},
    {"C": "Genomic imprinting"},
    {"D": "X-linked recessive"},
]


def message(*texts: str, role: str = "assistant") -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": role,
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []} for text in texts],
    }


def response(*items: Mapping[str, Any]) -> dict[str, Any]:
    return {"id": "resp_1", "object": "response", "status": "completed", "output": list(items)}


def text_response(text: str) -> dict[str, Any]:
    return response(message(text))


def case(
    case_id: str,
    mode: str,
    text: str,
    want: str | None,
    options: Sequence[Mapping[str, Any]] | None = OPTS_AD,
    **kwargs: Any,
) -> Any:
    return pytest.param(mode, text, options, kwargs, want, id=case_id)


EXTRACTION_CASES = [
    # --- 4.2 strict_single_letter_boxed: accepted forms -----------------------------------------------------
    case("strict-bare-letter", STRICT, r"So the final answer is \boxed{B}", "B"),
    case("strict-brackets-spaces", STRICT, r"\boxed{ [C] }", "C"),
    case("strict-parens", STRICT, r"\boxed{(B)}", "B"),
    case("strict-trailing-period", STRICT, r"\boxed{B.}", "B"),
    case("strict-numbered", STRICT, r"\boxed{1. B}", "B"),
    case("strict-label-colon", STRICT, r"\boxed{E: option text}", "E", OPTS_AJ),
    case("strict-label-paren", STRICT, r"\boxed{C) optC}", "C"),
    case("strict-label-period", STRICT, r"\boxed{D. optD}", "D"),
    case("strict-label-dash", STRICT, r"\boxed{C - optC}", "C"),
    case("strict-label-leading-spaces", STRICT, r"\boxed{   A : optA}", "A"),
    case("strict-text-wrapper", STRICT, r"Final answer: \boxed{\text{E}}", "E", OPTS_AJ),
    case("strict-text-wrapper-nested", STRICT, r"\boxed{\text{\text{ C }}}", "C"),
    case("strict-text-wrapper-label", STRICT, r"\boxed{\text{B: optB}}", "B"),
    case("strict-nested-braces-kept", STRICT, r"\boxed{{B}}", "B"),
    case("strict-last-box-valid", STRICT, r"\boxed{A} hmm, no: \boxed{C}", "C"),
    case("strict-label-letter-then-word", STRICT, r"\boxed{E. coli}", "E", OPTS_AJ),
    # beyond the contract: only ASCII letters count as letters around the answer letter
    case("strict-non-ascii-letters-are-non-letters", STRICT, r"\boxed{é B}", "B"),
    # --- 4.2 strict_single_letter_boxed: rejected forms -----------------------------------------------------
    case("strict-last-box-wins-over-valid-earlier", STRICT, r"\boxed{A} then \boxed{maybe}", None),
    case("strict-unclosed-box", STRICT, r"The answer is \boxed{B", None),
    case("strict-unclosed-last-box", STRICT, r"\boxed{A} and then \boxed{B", None),
    case("strict-lowercase", STRICT, r"\boxed{b}", None),
    case("strict-textbf-not-unwrapped", STRICT, r"\boxed{\textbf{B}}", None),
    case("strict-bare-option-text", STRICT, r"\boxed{A polygenic trait}", None, OPTS_TEXT),
    case("strict-letter-not-an-option", STRICT, r"\boxed{E}", None),
    case("strict-two-letters", STRICT, r"\boxed{A or C}", None),
    case("strict-two-text-wrappers", STRICT, r"\boxed{\text{A} or \text{B}}", None),
    case("strict-two-letter-word", STRICT, r"\boxed{AB}", None),
    case("strict-no-box", STRICT, "The answer is B", None),
    case("strict-answer-colon-ignored", STRICT, "I think the answer is B.\n\nAnswer: B", None),
    case("strict-empty-box", STRICT, r"\boxed{}", None),
    # --- 4.1 step 3: allowed letters ------------------------------------------------------------------------
    case("allowed-null-option-value", STRICT, r"\boxed{B}", None, [{"A": "x"}, {"B": None}]),
    case("allowed-lowercase-key", STRICT, r"\boxed{B}", "B", [{"a": "x"}, {"b": "y"}]),
    case("allowed-multi-char-key", STRICT, r"\boxed{A}", None, [{"AB": "x"}]),
    case("allowed-non-alpha-key", STRICT, r"\boxed{1}", None, [{"1": "x"}]),
    case("allowed-no-options", STRICT, r"\boxed{A}", None, None),
    case("allowed-noncontiguous", STRICT, r"\boxed{Z}", "Z", [{"A": "apple"}, {"Z": "zebra"}]),
    # --- 4.2 lenient_boxed ----------------------------------------------------------------------------------
    case("lenient-strict-first", LENIENT_BOXED, r"\boxed{B}", "B", OPTS_TEXT),
    case("lenient-option-text", LENIENT_BOXED, r"\boxed{A polygenic trait}", "A", OPTS_TEXT),
    case("lenient-normalised", LENIENT_BOXED, "\\boxed{  a   POLYGENIC\n trait }", "A", OPTS_TEXT),
    case("lenient-text-wrapper", LENIENT_BOXED, r"\boxed{\text{Genomic imprinting}}", "C", OPTS_TEXT),
    case("lenient-substring", LENIENT_BOXED, r"\boxed{so: genomic imprinting, clearly}", "C", OPTS_TEXT),
    case(
        "lenient-label-not-allowed-text-matches",
        LENIENT_BOXED,
        r"\boxed{E: Genomic imprinting}",
        "C",
        OPTS_TEXT,
    ),
    case(
        "lenient-two-options-match",
        LENIENT_BOXED,
        r"\boxed{Genomic imprinting or X-linked recessive}",
        None,
        OPTS_TEXT,
    ),
    case("lenient-no-box", LENIENT_BOXED, "Genomic imprinting", None, OPTS_TEXT),
    case(
        "lenient-only-last-box",
        LENIENT_BOXED,
        r"\boxed{Genomic imprinting} or rather \boxed{unsure}",
        None,
        OPTS_TEXT,
    ),
    case("lenient-unclosed-box", LENIENT_BOXED, r"\boxed{Genomic imprinting", None, OPTS_TEXT),
    case("lenient-lowercase-letter", LENIENT_BOXED, r"\boxed{b}", None, OPTS_TEXT),
    case(
        "lenient-empty-option-text-never-matches",
        LENIENT_BOXED,
        r"\boxed{Mitochondrial inheritance}",
        "B",
        [{"A": ""}, {"B": "Mitochondrial inheritance"}],
    ),
    case(
        "lenient-null-option-skipped",
        LENIENT_BOXED,
        r"\boxed{Mitochondrial inheritance}",
        None,
        [{"A": "x"}, {"B": None}],
    ),
    # --- 4.2 lenient_answer_colon ---------------------------------------------------------------------------
    case("colon-first-match", COLON, "Answer: A\nAnswer: B", "A"),
    case("colon-trailing-period", COLON, "Answer: B.", None),
    case("colon-dollars", COLON, "Answer: $D$", None),
    case("colon-markdown-bold", COLON, "**Answer: C**", None),
    case("colon-final-answer", COLON, "final answer: A", "A"),
    case("colon-option-text", COLON, "Answer: optC", "C"),
    case("colon-option-text-normalised", COLON, "Answer:   OPTC ", "C"),
    case("colon-lowercase-letter", COLON, "answer: b", "B"),
    case("colon-space-before-colon", COLON, "ANSWER : C", "C"),
    case("colon-text-wrapper", COLON, r"Answer: \text{D}", "D"),
    case("colon-letter-not-allowed", COLON, "Answer: E", None),
    case("colon-no-boxes", COLON, r"\boxed{B}", None),
    case("colon-no-colon", COLON, "The answer is B", None),
    case("colon-letter-plus-words", COLON, "Answer: B because", None),
    # beyond the contract: the spaces after the colon may include line breaks
    case("colon-payload-on-next-line", COLON, "Answer:\n\nB", "B"),
    # --- 4.2 lenient_answer_colon_md ------------------------------------------------------------------------
    case("md-plain", MD, "The answer is B.\n\nAnswer: B", "B"),
    case("md-repeated-letter", MD, "Answer: B/B", "B"),
    case("md-leading-letter", MD, "Answer: B because C is not valid", "B"),
    case("md-last-invalid-then-earlier", MD, "Answer: B\nAnswer: G", "B"),
    case("md-last-ambiguous-then-earlier", MD, "Answer: B\nAnswer: A/B/C", "B"),
    case("md-last-wins", MD, "Maybe Answer: A? Let me reconsider.\nFinal Answer: C", "C"),
    case("md-dollars", MD, "Answer: $D$", "D"),
    case("md-parens", MD, "Answer: (D)", "D"),
    case("md-boxed-text-answer", MD, r"\boxed{\text{Answer: G}}", "G", OPTS_AJ),
    case("md-underscores", MD, "__Answer__: A", "A"),
    case("md-bold", MD, "Reasoning here.\n\n**Answer: C**", "C"),
    case("md-bold-label", MD, "**Answer:** Z", "Z", [{"A": "apple"}, {"Z": "zebra"}]),
    case("md-final-answer", MD, "final answer: A", "A"),
    case("md-lowercase-letter", MD, "answer: b", "B"),
    case("md-trailing-punctuation", MD, "Answer: `C`.", "C"),
    case("md-arabic-letter", MD, "Answer: ب", "B"),
    case("md-bengali-letter", MD, "Answer: ঢ", "D"),
    case("md-fullwidth-letter", MD, "Answer: Ｃ", "C"),
    case("md-list-slashes", MD, "Answer: A/B/C", None),
    case("md-list-or", MD, "Answer: A or B", None),
    case("md-list-and", MD, "Answer: A and B", None),
    case("md-list-comma", MD, "Answer: A, B", None),
    case("md-list-semicolon", MD, "Answer: A; B", None),
    case("md-list-pipe", MD, "Answer: A | B", None),
    case("md-list-ampersand", MD, "Answer: A & B", None),
    case("md-list-space", MD, "Answer: A B", None),
    case("md-no-option-text", MD, "Answer: optC", None),
    case("md-no-answer", MD, "I think it might be B but I'm not sure", None),
    case("md-no-box-fallback-without-prefix", MD, r"\boxed{C}", None),
    case("md-letter-not-allowed", MD, "Answer: G", None),
    # beyond the contract: letters that are not options do not make a list
    case("md-non-option-letter-not-a-list", MD, "Answer: A/X", "A"),
    # beyond the contract: the whole text is NFKC-normalised before "Answer:" is looked for
    case("md-fullwidth-label", MD, "Ａｎｓｗｅｒ： B", "B"),
    # beyond the contract: a row-given `template_metadata.answer_prefix` is a second label
    case("md-prefix", MD, "Risposta: C", "C", answer_prefix="Risposta:"),
    case("md-prefix-case-insensitive", MD, "RISPOSTA: c", "C", answer_prefix="Risposta:"),
    case("md-prefix-rest-of-line", MD, "Risposta: D\nmore text", "D", answer_prefix="Risposta:"),
    case("md-prefix-after-answer-wins", MD, "Answer: A\nRisposta: C", "C", answer_prefix="Risposta:"),
    case("md-answer-after-prefix-wins", MD, "Risposta: C\nAnswer: A", "A", answer_prefix="Risposta:"),
    case("md-prefix-absent", MD, "Risposta: C", None),
    # beyond the contract: with a prefix, the strict box is the last resort
    case("md-prefix-box-fallback", MD, r"\boxed{C}", "C", answer_prefix="Risposta:"),
    case("md-prefix-ignored-in-other-modes", STRICT, "Risposta: C", None, answer_prefix="Risposta:"),
    # --- 4.3 template_metadata.output_regex -----------------------------------------------------------------
    case("regex-beats-mode", STRICT, "Final Choice: B", "B", output_regex=r"Final Choice:\s*([A-Za-z])"),
    case("regex-case-insensitive", STRICT, "final choice: b", "B", output_regex=r"Final Choice:\s*([A-Z])"),
    case(
        "regex-last-match",
        STRICT,
        "Maybe Answer: A? Let me reconsider. Final Answer: B",
        "B",
        output_regex=r"Answer:\s*([A-Za-z])",
    ),
    case("regex-trusted-letter", STRICT, "Selected: Z", "Z", output_regex=r"Selected:\s*([A-Za-z])"),
    case("regex-no-options", STRICT, "Selected: B", "B", [], output_regex=r"Selected:\s*([A-Za-z])"),
    case("regex-option-text", STRICT, "Choice: optC", "C", output_regex=r"Choice:\s*(\w+)"),
    case("regex-localised-letter", STRICT, "Selected: ب", "B", output_regex=r"Selected:\s*(\S+)"),
    case("regex-no-group", STRICT, "I pick C", "C", output_regex=r"\b[A-D]\b"),
    case(
        "regex-list-first-fails",
        STRICT,
        "Selected: C",
        "C",
        output_regex=[r"Pick:\s*([A-Z])", r"Selected:\s*([A-Z])"],
    ),
    case(
        "regex-list-first-wins",
        STRICT,
        "Pick: A\nSelected: C",
        "A",
        output_regex=[r"Pick:\s*([A-Z])", r"Selected:\s*([A-Z])"],
    ),
    case("regex-invalid-falls-back", STRICT, r"\boxed{B}", "B", output_regex=r"(["),
    case("regex-no-match-falls-back", STRICT, r"\boxed{D}", "D", output_regex=r"Selected:\s*([A-Z])"),
    case(
        "regex-unusable-capture-falls-back",
        STRICT,
        "Selected: banana\n\\boxed{A}",
        "A",
        output_regex=r"Selected:\s*(\w+)",
    ),
    case("regex-beats-md", MD, "Selected: D\nAnswer: A", "D", output_regex=r"Selected:\s*([A-Z])"),
    case("regex-empty-list", STRICT, r"\boxed{A}", "A", output_regex=[]),
    case(
        "regex-multi-group-without-match",
        STRICT,
        r"\boxed{A}",
        "A",
        output_regex=r"(Selected):\s*([A-Z])",
    ),
]


@pytest.mark.parametrize(("mode", "text", "options", "kwargs", "want"), EXTRACTION_CASES)
def test_extracted_answer(
    mode: str,
    text: str,
    options: Sequence[Mapping[str, Any]] | None,
    kwargs: dict[str, Any],
    want: str | None,
) -> None:
    result = grade(response=text_response(text), options=options, expected_answer="B", mode=mode, **kwargs)
    assert result.extracted_answer == want
    assert result.reward == (1.0 if want == "B" else 0.0)


@pytest.mark.parametrize(
    ("text", "expected_answer", "options", "kwargs", "want"),
    [
        pytest.param(r"\boxed{B}", "B", OPTS_AD, {}, Grade(1.0, "B", "B"), id="correct"),
        pytest.param(r"\boxed{C}", "B", OPTS_AD, {}, Grade(0.0, "C", "B"), id="wrong"),
        pytest.param(r"\boxed{b}", "B", OPTS_AD, {}, Grade(0.0, None, "B"), id="no-answer"),
        pytest.param(r"\boxed{B}", " b ", OPTS_AD, {}, Grade(1.0, "B", "B"), id="gold-stripped-upper-cased"),
        pytest.param(r"\boxed{B}", None, OPTS_AD, {}, Grade(0.0, "B", ""), id="gold-missing"),
        pytest.param(r"\boxed{B}", "  ", OPTS_AD, {}, Grade(0.0, "B", ""), id="gold-blank"),
        pytest.param(
            "Selected: Z",
            "B",
            OPTS_AD,
            {"output_regex": r"Selected:\s*([A-Za-z])"},
            Grade(0.0, "Z", "B"),
            id="regex-letter-outside-options",
        ),
        pytest.param("", "B", OPTS_AD, {}, Grade(0.0, None, "B"), id="empty-text"),
        pytest.param(" \n\t ", "B", OPTS_AD, {}, Grade(0.0, None, "B"), id="blank-text"),
        pytest.param(
            "   ",
            "B",
            OPTS_AD,
            {"output_regex": r"(.*)"},
            Grade(0.0, None, "B"),
            id="blank-text-regex-not-tried",
        ),
        pytest.param(
            "",
            "B",
            [{"B": ""}],
            {"output_regex": r"()"},
            Grade(0.0, None, "B"),
            id="empty-text-regex-not-tried",
        ),
    ],
)
def test_grade(
    text: str,
    expected_answer: str | None,
    options: Sequence[Mapping[str, Any]],
    kwargs: dict[str, Any],
    want: Grade,
) -> None:
    got = grade(response=text_response(text), options=options, expected_answer=expected_answer, mode=STRICT, **kwargs)
    assert got == want


@pytest.mark.parametrize(
    ("resp", "want"),
    [
        pytest.param(response(message("Hello "), message("world")), "Hello world", id="several-messages"),
        pytest.param(response(message("a", "b", "c")), "abc", id="several-parts"),
        pytest.param(response(message("  \n B \n")), "B", id="stripped"),
        pytest.param(
            response(
                {
                    "type": "reasoning",
                    "id": "rs_1",
                    "summary": [{"type": "summary_text", "text": "thinking"}],
                    "content": [{"type": "output_text", "text": "hidden"}],
                },
                message("shown"),
            ),
            "shown",
            id="reasoning-ignored",
        ),
        pytest.param(
            response(
                {"type": "function_call", "id": "fc_1", "call_id": "c", "name": "f", "arguments": "{}"},
                message("x"),
            ),
            "x",
            id="tool-call-ignored",
        ),
        pytest.param(
            response(
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [
                        {"type": "refusal", "refusal": "no"},
                        {"type": "output_text", "text": "yes"},
                    ],
                }
            ),
            "yes",
            id="refusal-part-ignored",
        ),
        pytest.param(response(message("a", role="user"), message("b")), "ab", id="any-role"),
        pytest.param(response(), "", id="no-output"),
        pytest.param({"id": "resp_1"}, "", id="output-missing"),
        pytest.param({"output": None}, "", id="output-null"),
    ],
)
def test_output_text(resp: Mapping[str, Any], want: str) -> None:
    assert output_text(resp) == want


def test_output_text_parts_join_without_separator_before_grading() -> None:
    resp = response(
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": r"\boxed{A}"}]},
        message("The answer is \\boxed{"),
        message("B}"),
    )
    assert grade(response=resp, options=OPTS_AD, expected_answer="B", mode=STRICT) == Grade(1.0, "B", "B")


@pytest.mark.parametrize(
    ("server_mode", "row_mode", "want"),
    [
        pytest.param(None, None, STRICT, id="row-default"),
        pytest.param(None, LENIENT_BOXED, LENIENT_BOXED, id="row-mode"),
        pytest.param(None, COLON, COLON, id="row-colon"),
        pytest.param(COLON, STRICT, COLON, id="server-beats-row"),
        pytest.param(LENIENT_BOXED, None, LENIENT_BOXED, id="server-without-row"),
        pytest.param(MD, STRICT, MD, id="server-md"),
    ],
)
def test_effective_mode(server_mode: str | None, row_mode: str | None, want: str) -> None:
    assert effective_mode(server_mode, row_mode) == want


@pytest.mark.parametrize(
    ("server_mode", "row_mode"),
    [
        pytest.param(None, MD, id="md-in-row"),
        pytest.param(MD, MD, id="md-in-row-even-under-server-mode"),
        pytest.param(None, "bogus", id="unknown-row-mode"),
        pytest.param("bogus", None, id="unknown-server-mode"),
        pytest.param("", None, id="empty-server-mode"),
    ],
)
def test_effective_mode_rejects(server_mode: str | None, row_mode: str | None) -> None:
    with pytest.raises(MCQAInputError):
        effective_mode(server_mode, row_mode)


def test_mode_sets() -> None:
    assert {STRICT, LENIENT_BOXED, COLON} == ROW_GRADING_MODES
    assert ROW_GRADING_MODES | {MD} == SERVER_GRADING_MODES
    assert DEFAULT_ROW_GRADING_MODE == STRICT


@pytest.mark.parametrize(
    ("server_mode", "want"),
    [
        pytest.param(COLON, Grade(1.0, "B", "B"), id="server-colon"),
        pytest.param(None, Grade(0.0, None, "B"), id="row"),
    ],
)
def test_server_mode_beats_row_mode_end_to_end(server_mode: str | None, want: Grade) -> None:
    mode = effective_mode(server_mode, STRICT)
    resp = text_response("I think the answer is B.\n\nAnswer: B")
    assert grade(response=resp, options=OPTS_AD, expected_answer="B", mode=mode) == want


@pytest.mark.parametrize(
    ("kwargs", "text"),
    [
        pytest.param({"mode": "bogus"}, r"\boxed{B}", id="unknown-mode"),
        pytest.param({"mode": STRICT, "output_regex": r"(Selected):\s*([A-Z])"}, "Selected: B", id="multi-group-regex"),
        pytest.param({"mode": STRICT, "output_regex": [r"Selected:\s*([A-Z])", 7]}, "hi", id="non-string-regex"),
        pytest.param({"mode": STRICT, "output_regex": 7}, "hi", id="non-list-regex"),
        pytest.param({"mode": MD, "answer_prefix": 7}, "hi", id="non-string-prefix-in-md"),
    ],
)
def test_grade_rejects_inputs_nemo_gym_fails_on(kwargs: dict[str, Any], text: str) -> None:
    with pytest.raises(MCQAInputError):
        grade(response=text_response(text), options=OPTS_AD, expected_answer="B", **kwargs)


@pytest.mark.parametrize(
    ("template_metadata", "want"),
    [
        pytest.param(None, {}, id="none"),
        pytest.param({}, {}, id="empty"),
        pytest.param({"other": 1}, {}, id="unrelated"),
        pytest.param({"output_regex": "x"}, {"output_regex": "x"}, id="regex"),
        pytest.param({"output_regex": ["x", "y"]}, {"output_regex": ["x", "y"]}, id="regex-list"),
        pytest.param({"output_regex": None}, {}, id="regex-null"),
        pytest.param({"answer_prefix": "Risposta:"}, {"answer_prefix": "Risposta:"}, id="prefix"),
        pytest.param({"answer_prefix": ""}, {}, id="prefix-empty"),
    ],
)
def test_template_metadata_kwargs(template_metadata: Mapping[str, Any] | None, want: dict[str, Any]) -> None:
    assert template_metadata_kwargs(template_metadata) == want


def test_every_letter_of_a_ten_option_question() -> None:
    for letter in string.ascii_uppercase[:10]:
        got = grade(
            response=text_response(f"\\boxed{{{letter}}}"),
            options=OPTS_AJ,
            expected_answer=letter,
            mode=STRICT,
        )
        assert got == Grade(1.0, letter, letter)
