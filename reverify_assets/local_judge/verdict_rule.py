"""The local judge model's deterministic verdict (pure: no I/O, no randomness).

Where the answers are: the prompt must hold the two answer blocks of the ``equivalence_judge`` default
template, ``<|Start of Answer A|>`` … ``<|End of Answer A|>`` followed by ``<|Start of Answer B|>`` …
``<|End of Answer B|>``. B is read from its *last* block, A from the last block before it, so a question
quoting the markers does not confuse the rule. Without them, the layout of NeMo Gym's own
``equivalence_llm_judge`` template is read: A follows its last ``GOLD:`` line, up to the ``CANDIDATE:`` line
after it, and B is the rest (the template's worked examples come before its inputs). A custom template must
keep one of the two layouts for this model to work (a real LLM judge does not need them); with neither,
:func:`answers_in_prompt` raises :class:`MissingMarkers` and the server answers HTTP 400.

When two answers are equivalent, in order:

1. Each answer is reduced to its final answer: the content of its last ``\\boxed{…}`` if it has one, else
   what follows its last ``answer:`` (case-insensitive) on that line, else the whole text.
2. Normalisation: NFKC; the Unicode minus becomes ``-``; ``\\boxed``/``\\text``/``\\textbf``/``\\mathrm``/
   ``\\mathbf``/``\\operatorname`` wrappers are unwrapped and ``\\frac{a}{b}`` (also ``\\dfrac``,
   ``\\tfrac``) becomes ``a/b``; ``$``, ``\\(``, ``\\)``, ``\\[``, ``\\]`` and LaTeX spacing commands are
   dropped; casefolded; whitespace collapsed; ``.,;:!?`` and quotes stripped from both ends (a leading
   ``.`` before a digit is a decimal point and stays).
3. Numbers: if both answers are a number (integer, decimal, ``.5``, scientific, a fraction ``a/b``;
   thousands separators ``1,000`` allowed) optionally followed by a unit of at most two words (``12 cm``,
   ``5 km/h``, ``50%``), they are equivalent when the numbers are equal as exact rationals (``0.5`` =
   ``1/2`` = ``.50``) and the units are equal or one of them is absent.
4. Otherwise they are equivalent when they are equal after dropping every whitespace, punctuation and
   symbol character (``New-York`` = ``new york``). Two answers with nothing left after that are
   equivalent only when their raw texts are equal (stripped).

The reply is one short reasoning sentence, then ``[[A=B]]`` or ``[[A!=B]]``. The sentence never quotes the
answers, so an answer that contains a verdict label cannot plant one in the reply.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from fractions import Fraction

from reverify_assets.servers.judge.prompt import ANSWER_A_END, ANSWER_A_START, ANSWER_B_END, ANSWER_B_START
from reverify_assets.servers.judge.verdict import EQUAL_LABEL, NOT_EQUAL_LABEL


class MissingMarkers(ValueError):
    """The prompt does not hold both answer blocks."""


@dataclass(frozen=True, slots=True)
class Answers:
    expected: str  # answer A
    candidate: str  # answer B


@dataclass(frozen=True, slots=True)
class Quantity:
    value: Fraction
    unit: str  # "" when absent


GOLD_LINE, CANDIDATE_LINE = "\nGOLD:\n", "\nCANDIDATE:\n"  # NeMo Gym's equivalence_llm_judge template


def answers_in_prompt(prompt: str) -> Answers:
    b_end = prompt.rfind(ANSWER_B_END)
    b_start = prompt.rfind(ANSWER_B_START, 0, b_end) if b_end >= 0 else -1
    a_end = prompt.rfind(ANSWER_A_END, 0, b_start) if b_start >= 0 else -1
    a_start = prompt.rfind(ANSWER_A_START, 0, a_end) if a_end >= 0 else -1
    if a_start >= 0:
        return Answers(
            expected=prompt[a_start + len(ANSWER_A_START) : a_end].strip(),
            candidate=prompt[b_start + len(ANSWER_B_START) : b_end].strip(),
        )
    candidate_at = prompt.rfind(CANDIDATE_LINE)
    gold_at = prompt.rfind(GOLD_LINE, 0, candidate_at) if candidate_at >= 0 else -1
    if gold_at >= 0:
        return Answers(
            expected=prompt[gold_at + len(GOLD_LINE) : candidate_at].strip(),
            candidate=prompt[candidate_at + len(CANDIDATE_LINE) :].strip(),
        )
    raise MissingMarkers(
        f"the prompt lacks the answer markers {ANSWER_A_START} … {ANSWER_A_END} then {ANSWER_B_START} … "
        f"{ANSWER_B_END}, and NeMo Gym's GOLD: … CANDIDATE: layout (keep one of them in a custom prompt template "
        "to use the local judge model)"
    )


def last_boxed(text: str) -> str | None:
    """The content of the last ``\\boxed{…}`` (braces counted), or None."""
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    depth = 0
    for index in range(start + len("\\boxed{") - 1, len(text)):
        if text[index] == "{":
            depth += 1
        elif text[index] == "}":
            depth -= 1
            if depth == 0:
                return text[start + len("\\boxed{") : index]
    return None


_ANSWER_COLON = re.compile(r"answer\s*[:：]\s*(.*)", re.IGNORECASE)


def final_answer(text: str) -> str:
    boxed = last_boxed(text)
    if boxed is not None:
        return boxed
    matches = list(_ANSWER_COLON.finditer(text))
    if matches and matches[-1].group(1).strip():
        return matches[-1].group(1)
    return text


_WRAPPER = re.compile(r"\\(?:boxed|text|textbf|mathrm|mathbf|operatorname)\s*\{([^{}]*)\}")
_FRACTION = re.compile(r"\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}")
_LATEX_NOISE = re.compile(r"\\left|\\right|\\[,;:! ]|\\\(|\\\)|\\\[|\\\]|\$")
_EDGE_PUNCTUATION = " \t\n.,;:!?\"'`"
# Leading punctuation goes, except a "." that is a decimal point (".5"): the lazy match stops before it.
_LEADING_PUNCTUATION = re.compile(r"^[\s.,;:!?\"'`]*?(?=\.\d|[^\s.,;:!?\"'`]|$)")


def normalise(text: str) -> str:
    text = unicodedata.normalize("NFKC", final_answer(text)).replace("\u2212", "-")
    previous = None
    while previous != text:  # nested wrappers unwrap from the inside out
        previous = text
        text = _FRACTION.sub(r"\1/\2", _WRAPPER.sub(r"\1", text))
    text = _LATEX_NOISE.sub("", text).replace("\\%", "%")
    text = " ".join(text.casefold().split()).rstrip(_EDGE_PUNCTUATION)
    return _LEADING_PUNCTUATION.sub("", text, count=1)  # count=1: no second, non-empty match at 0


_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:e[-+]?\d+)?"
_UNIT_WORD = r"(?:%|°[a-z]?|[^\W\d_]+(?:\^?-?\d)?(?:/[^\W\d_]+(?:\^?-?\d)?)*)"
_QUANTITY = re.compile(rf"^({_NUMBER})(?:\s*/\s*({_NUMBER}))?\s*((?:{_UNIT_WORD})(?:\s+{_UNIT_WORD})?)?\.?$")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")


def as_quantity(normalised: str) -> Quantity | None:
    match = _QUANTITY.match(_THOUSANDS.sub("", normalised))
    if match is None:
        return None
    numerator, denominator, unit = match.groups()
    try:
        value = Fraction(numerator) / Fraction(denominator) if denominator else Fraction(numerator)
    except (ValueError, ZeroDivisionError):
        return None
    return Quantity(value, unit or "")


def _bare(normalised: str) -> str:
    return "".join(ch for ch in normalised if not ch.isspace() and unicodedata.category(ch)[0] not in "PS")


def equivalent(expected: str, candidate: str) -> tuple[bool, str]:
    """Whether the two answers are equivalent, and which comparison decided it ("number" or "text")."""
    a, b = normalise(expected), normalise(candidate)
    qa, qb = as_quantity(a), as_quantity(b)
    if qa is not None and qb is not None:
        return qa.value == qb.value and (qa.unit == qb.unit or not qa.unit or not qb.unit), "number"
    bare_a, bare_b = _bare(a), _bare(b)
    if not bare_a and not bare_b:  # only punctuation or symbols on both sides: those are the answer
        return expected.strip() == candidate.strip(), "text"
    return bare_a == bare_b, "text"


def verdict_reply(prompt: str) -> str:
    """The whole reply text for a prompt; MissingMarkers when the answers cannot be found."""
    answers = answers_in_prompt(prompt)
    same, how = equivalent(answers.expected, answers.candidate)
    if same:
        what = "the same number" if how == "number" else "the same text once case, spacing and punctuation are ignored"
        return f"After normalisation answer A and answer B are {what}, so they are equivalent. {EQUAL_LABEL}"
    what = "different numbers" if how == "number" else "different texts"
    return f"After normalisation answer A and answer B are {what}, so they are not equivalent. {NOT_EQUAL_LABEL}"
