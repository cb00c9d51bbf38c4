"""Answer extraction and scoring for multiple-choice rows, as NeMo Gym 0.7.0's `mcqa` server grades them.

This is pure logic (no I/O). Every rule here exists because NeMo Gym behaves that way, including the odd ones:
rewards written by this module must be interchangeable with the ones `gym eval reverify` writes. The spec is
docs/nemo-gym-contract.md, sections 4.1-4.3; the conformance set under tests/data/conformance/mcqa/ pins it.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import pairwise
from typing import Any, Final, Literal

from reverify_assets.rows.row_fields import is_mapping

__all__ = [
    "DEFAULT_ROW_GRADING_MODE",
    "ROW_GRADING_MODES",
    "SERVER_GRADING_MODES",
    "Grade",
    "GradingMode",
    "MCQAInputError",
    "effective_mode",
    "grade",
    "output_text",
    "template_metadata_kwargs",
]

GradingMode = Literal[
    "strict_single_letter_boxed",
    "lenient_boxed",
    "lenient_answer_colon",
    "lenient_answer_colon_md",
]

ROW_GRADING_MODES: frozenset[str] = frozenset({"strict_single_letter_boxed", "lenient_boxed", "lenient_answer_colon"})
# The markdown-aware mode was added to the server config only; NeMo Gym's request model still rejects it.
SERVER_GRADING_MODES: frozenset[str] = ROW_GRADING_MODES | {"lenient_answer_colon_md"}
DEFAULT_ROW_GRADING_MODE: Final = "strict_single_letter_boxed"


class MCQAInputError(ValueError):
    """An input NeMo Gym would refuse (HTTP 422) or fail on (HTTP 500) instead of grading it."""


@dataclass(frozen=True)
class Grade:
    reward: float
    extracted_answer: str | None
    expected_answer: str


# --- patterns ----------------------------------------------------------------------------------------------

_BOX_OPEN: Final = "\\boxed{"
_BRACE = re.compile(r"[{}]")

# Anchored with fullmatch: a `\text{A} or \text{B}` string is one wrapper whose content is "A} or \text{B",
# which is what NeMo Gym unwraps too.
_TEXT_WRAPPER = re.compile(r"\\text\{\s*(.*?)\s*\}", re.DOTALL)

# Only ASCII counts as "a letter" here, so accented or non-Latin characters may surround the answer letter.
_BOX_LONE_LETTER = re.compile(r"[^A-Za-z]*([A-Z])[^A-Za-z]*")
_BOX_LABELLED_LETTER = re.compile(r"\s*([A-Z])\s*[:).\-]")

# `\s*` after the colon may run over line breaks: "Answer:\n\nB" yields "B".
_ANSWER_COLON = re.compile(r"answer\s*:\s*(.+)", re.IGNORECASE)
_MD_ANSWER_COLON = re.compile(r"[*_]{0,2}Answer[*_]{0,2}\s*:[*_\s]{0,2}(.+)", re.IGNORECASE | re.MULTILINE)

_STANDALONE_ASCII_LETTER = re.compile(r"(?<![A-Za-z])([A-Za-z])(?![A-Za-z])")
_CHOICE_LIST_SEPARATOR = re.compile(r"\s*[/|&,;]\s*|\s+(?:or|and)\s+|\s+", re.IGNORECASE)
_LEADING_LETTER = re.compile(r"([a-zA-Z])(?![a-zA-Z0-9])")
# `\b` is Unicode-aware, as in NeMo Gym: a letter glued to "_" or to a digit is not standalone.
_LAST_STANDALONE_UPPER = re.compile(r"\b[A-Z]\b(?!.*\b[A-Z]\b)", re.DOTALL)

# The answer-payload trim set of the md mode.
_PAYLOAD_TRIM: Final = "*_` \t\n\r.,;:"

# Arabic, Bengali and fullwidth spellings of A-D, as NeMo-Skills prompts in those languages produce them.
# The leading space keeps "ب" glued to a word from forming a longer token with it.
_LOCALISED_LETTERS: Final = str.maketrans(
    {
        "أ": " A", "ب": " B", "ج": " C", "د": " D",
        "অ": " A", "ব": " B", "ড": " C", "ঢ": " D",
        "Ａ": " A", "Ｂ": " B", "Ｃ": " C", "Ｄ": " D",
    }
)  # fmt: skip


# --- public API --------------------------------------------------------------------------------------------


def output_text(response: Mapping[str, Any]) -> str:
    """The Responses API `output_text` of `response`, stripped.

    Like the openai SDK property NeMo Gym uses: the text of every `output_text` part of every `message` item,
    joined with no separator, whatever the message's role. Reasoning and tool items carry no answer.
    """
    parts: list[str] = []
    for item in _iter_mappings(response.get("output")):
        if item.get("type") != "message":
            continue
        for part in _iter_mappings(item.get("content")):
            text = part.get("text")
            if part.get("type") == "output_text" and isinstance(text, str):
                parts.append(text)
    return "".join(parts).strip()


def effective_mode(server_mode: str | None, row_mode: str | None) -> str:
    """The grading mode NeMo Gym applies: the server config's when set, else the row's, else the default.

    `row_mode=None` means the row has no `grading_mode` key. A row mode is validated even when the server
    mode overrides it, because NeMo Gym validates the request body before grading.
    """
    if row_mode is not None and row_mode not in ROW_GRADING_MODES:
        raise MCQAInputError(
            f"grading_mode {row_mode!r} is not accepted in a row; expected one of {sorted(ROW_GRADING_MODES)}"
        )
    if server_mode is not None and server_mode not in SERVER_GRADING_MODES:
        raise MCQAInputError(f"server grading_mode {server_mode!r} is not one of {sorted(SERVER_GRADING_MODES)}")
    return server_mode or row_mode or DEFAULT_ROW_GRADING_MODE


def template_metadata_kwargs(template_metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """The `grade` keyword arguments a row's `template_metadata` carries (`output_regex`, `answer_prefix`)."""
    kwargs: dict[str, Any] = {}
    # An empty mapping counts as absent, as in NeMo Gym.
    if not template_metadata:
        return kwargs
    # A null `output_regex` makes NeMo Gym fail (HTTP 500); here it counts as absent.
    if template_metadata.get("output_regex") is not None:
        kwargs["output_regex"] = template_metadata["output_regex"]
    if template_metadata.get("answer_prefix"):
        kwargs["answer_prefix"] = template_metadata["answer_prefix"]
    return kwargs


def grade(
    *,
    response: Mapping[str, Any],
    options: Sequence[Mapping[str, Any]] | None,
    expected_answer: str | None,
    mode: str,
    output_regex: str | Sequence[str] | None = None,
    answer_prefix: str | None = None,
) -> Grade:
    """Grade one response the way NeMo Gym's mcqa `/verify` does.

    `mode` is the effective mode (see `effective_mode`). `output_regex` and `answer_prefix` are the row's
    `template_metadata` fields of those names (see `template_metadata_kwargs`); `answer_prefix` only matters
    in `lenient_answer_colon_md`.
    """
    if mode not in SERVER_GRADING_MODES:
        raise MCQAInputError(f"unknown grading mode {mode!r}")

    gold = (expected_answer or "").strip().upper()
    text = output_text(response)
    # An empty answer is not even shown to the template regex.
    if not text:
        return Grade(reward=0.0, extracted_answer=None, expected_answer=gold)

    pairs = _option_pairs(options)
    allowed = _allowed_letters(pairs)
    prediction: str | None = None
    if output_regex is not None:
        prediction = _from_output_regexes(text, output_regex, allowed, pairs)
    if prediction is None:
        prediction = _from_mode(mode, text, allowed, pairs, answer_prefix)

    correct = prediction is not None and bool(gold) and prediction == gold
    return Grade(reward=1.0 if correct else 0.0, extracted_answer=prediction, expected_answer=gold)


# --- helpers -----------------------------------------------------------------------------------------------


def _iter_mappings(value: Any) -> Iterable[Mapping[str, Any]]:
    if not isinstance(value, list | tuple):
        return ()
    return [element for element in value if is_mapping(element)]


def _option_pairs(options: Sequence[Mapping[str, Any]] | None) -> list[tuple[Any, Any]]:
    return [pair for entry in options or () if is_mapping(entry) for pair in entry.items()]


def _allowed_letters(pairs: list[tuple[Any, Any]]) -> set[str]:
    # `isalpha`/`upper` are Unicode-aware on purpose: NeMo Gym accepts a key such as "É" the same way.
    return {
        key.upper()
        for key, value in pairs
        if isinstance(key, str) and len(key) == 1 and key.isalpha() and value is not None
    }


def _normalise(text: str) -> str:
    return " ".join(text.lower().split())


def _option_with_text(candidate: str, pairs: list[tuple[Any, Any]], allowed: set[str]) -> str | None:
    """The first option (in listed order) whose normalised text equals the normalised candidate."""
    wanted = _normalise(candidate)
    for key, value in pairs:
        if isinstance(key, str) and isinstance(value, str) and key.upper() in allowed:
            if _normalise(value) == wanted:
                return key.upper()
    return None


def _localise(text: str) -> str:
    return unicodedata.normalize("NFKC", text).translate(_LOCALISED_LETTERS).strip()


def _unwrap_text(text: str) -> str:
    while (match := _TEXT_WRAPPER.fullmatch(text)) is not None:
        text = match.group(1)
    return text


def _last_box_content(text: str) -> str | None:
    """Everything inside the last `\\boxed{...}`, braces counted; None without a box or a closing brace.

    The last box wins so that intermediate boxes of a chain of thought never count.
    """
    start = text.rfind(_BOX_OPEN)
    if start < 0:
        return None
    body_start = start + len(_BOX_OPEN)
    depth = 1
    for brace in _BRACE.finditer(text, body_start):
        if brace.group() == "{":
            depth += 1
        else:
            depth -= 1
            if depth == 0:
                return text[body_start : brace.start()]
    return None


def _from_mode(
    mode: str,
    text: str,
    allowed: set[str],
    pairs: list[tuple[Any, Any]],
    answer_prefix: str | None,
) -> str | None:
    if mode == "strict_single_letter_boxed":
        return _strict_boxed(_last_box_content(text), allowed)
    if mode == "lenient_boxed":
        content = _last_box_content(text)
        return _strict_boxed(content, allowed) or _boxed_option_text(content, allowed, pairs)
    if mode == "lenient_answer_colon":
        return _answer_colon(text, allowed, pairs)
    return _answer_colon_md(text, allowed, answer_prefix)


def _strict_boxed(content: str | None, allowed: set[str]) -> str | None:
    """The letter of a box's content (see ``_last_box_content``)."""
    if content is None:
        return None
    content = _unwrap_text(content.strip())
    match = _BOX_LONE_LETTER.fullmatch(content) or _BOX_LABELLED_LETTER.match(content)
    if match is None:
        return None
    letter = match.group(1)
    return letter if letter in allowed else None


def _boxed_option_text(content: str | None, allowed: set[str], pairs: list[tuple[Any, Any]]) -> str | None:
    """The one option whose text a box's content (see ``_last_box_content``) holds."""
    if content is None:
        return None
    content = content.strip()
    candidates = {_normalise(content), _normalise(_unwrap_text(content))}
    option_texts = [
        (key.upper(), _normalise(value))
        for key, value in pairs
        if isinstance(key, str) and isinstance(value, str) and len(key) == 1 and key.upper() in allowed
    ]
    matched = {
        letter
        for letter, option_text in option_texts
        if option_text and any(option_text in candidate for candidate in candidates)
    }
    # Two matching options mean the answer names several choices: no answer.
    return next(iter(matched)) if len(matched) == 1 else None


def _answer_colon(text: str, allowed: set[str], pairs: list[tuple[Any, Any]]) -> str | None:
    match = _ANSWER_COLON.search(text)
    if match is None:
        return None
    candidate = _unwrap_text(match.group(1)).strip()
    if len(candidate) == 1 and candidate.isalpha() and candidate.upper() in allowed:
        return candidate.upper()
    return _option_with_text(candidate, pairs, allowed)


def _answer_colon_md(text: str, allowed: set[str], answer_prefix: str | None) -> str | None:
    # Other modes ignore the prefix whatever its type; only this one needs it to be text.
    if answer_prefix and not isinstance(answer_prefix, str):
        raise MCQAInputError(f"template_metadata.answer_prefix {answer_prefix!r} is not a string")
    for payload in reversed(_answer_payloads(text, answer_prefix)):
        letter = _payload_letter(payload, allowed)
        if letter is not None:
            return letter
    # A row that declares its own answer prefix also gets the boxed form as a last resort.
    if answer_prefix:
        return _strict_boxed(_last_box_content(text), allowed)
    return None


def _answer_payloads(text: str, answer_prefix: str | None) -> list[str]:
    """The rest of the line after each `Answer:` (and each row prefix), in text order."""
    text = unicodedata.normalize("NFKC", text)
    found = [(match.start(), match.group(1)) for match in _MD_ANSWER_COLON.finditer(text)]
    if answer_prefix:
        prefix = re.compile(re.escape(unicodedata.normalize("NFKC", answer_prefix)) + r"\s*", re.IGNORECASE)
        for match in prefix.finditer(text):
            line_end = text.find("\n", match.end())
            found.append((match.start(), text[match.end() : line_end if line_end >= 0 else len(text)]))
    # Stable: at one start position an `Answer:` match stays before a prefix match.
    found.sort(key=lambda item: item[0])
    return [payload for _start, payload in found]


def _payload_letter(payload: str, allowed: set[str]) -> str | None:
    candidate = _localise(payload).strip().strip(_PAYLOAD_TRIM)
    if _is_ambiguous_choice_list(candidate, allowed):
        return None
    letter: str | None
    if len(candidate) == 1:
        letter = candidate
    elif (leading := _LEADING_LETTER.match(candidate)) is not None:
        letter = leading.group(1)
    elif (last := _LAST_STANDALONE_UPPER.search(candidate)) is not None:
        letter = last.group(0)
    else:
        letter = None
    if letter and letter.upper() in allowed:
        return letter.upper()
    return None


def _is_ambiguous_choice_list(candidate: str, allowed: set[str]) -> bool:
    """Whether two different allowed letters stand next to each other as a list ("A/B", "A or B", "A, B")."""
    letters = [
        (match.group(1).upper(), match.span(1))
        for match in _STANDALONE_ASCII_LETTER.finditer(candidate)
        if match.group(1).upper() in allowed
    ]
    return any(
        left != right and _CHOICE_LIST_SEPARATOR.fullmatch(candidate[left_end:right_start]) is not None
        for (left, (_, left_end)), (right, (right_start, _)) in pairwise(letters)
    )


@lru_cache(maxsize=256)
def _compile_output_regex(pattern: str) -> re.Pattern[str] | None:
    try:
        return re.compile(pattern, re.IGNORECASE)
    except re.error:
        return None


def _from_output_regexes(
    text: str,
    output_regex: str | Sequence[str],
    allowed: set[str],
    pairs: list[tuple[Any, Any]],
) -> str | None:
    if isinstance(output_regex, str):
        patterns: Iterable[Any] = (output_regex,)
    elif isinstance(output_regex, Iterable):
        patterns = output_regex
    else:
        raise MCQAInputError(f"template_metadata.output_regex {output_regex!r} is not a string or a list")
    for pattern in patterns:
        prediction = _from_output_regex(text, pattern, allowed, pairs)
        if prediction is not None:
            return prediction
    return None


def _from_output_regex(text: str, pattern: str, allowed: set[str], pairs: list[tuple[Any, Any]]) -> str | None:
    if not isinstance(pattern, str):
        raise MCQAInputError(f"template_metadata.output_regex entry {pattern!r} is not a string")
    compiled = _compile_output_regex(pattern)
    # An invalid pattern is not an error: grading falls back to the mode.
    if compiled is None:
        return None
    matches = compiled.findall(text)
    if not matches:
        return None
    last = matches[-1]
    if isinstance(last, tuple):
        raise MCQAInputError(
            f"template_metadata.output_regex {pattern!r} has {compiled.groups} capture groups; "
            "NeMo Gym fails on a pattern with more than one"
        )
    captured = _localise(last.strip()).upper()
    # The template's regex is trusted: a letter outside the options is still the extracted answer.
    if len(captured) == 1 and captured.isalpha():
        return captured
    return _option_with_text(captured, pairs, allowed)
