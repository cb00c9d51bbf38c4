"""How a synthetic QA rollout phrases its answer: the response a model sent back for one (task, rollout) pair.

Picks right or wrong by the task's skill, an answer form from the task's variants, and one of the answer formats
real models use (`\\boxed{}`, `Answer: ...`, a bare value, a sentence, two boxes, no answer, an empty message),
then wraps the text in a NeMo Gym Responses API object. What the question and its answers are lives in
``qa_questions``; what the judge made of the response lives in the driver, ``qa_rollouts``.

The RNG draws are taken in a fixed order, so any change here changes every generated file.
"""

from __future__ import annotations

from collections.abc import Callable
from random import Random
from typing import Final

from reverify_assets.synthetic.nemo_gym_rows import (
    Row,
    approx_tokens,
    between,
    derived_seed,
    distinct,
    finished_response,
    message_item,
    pick,
    reasoning_item,
)
from reverify_assets.synthetic.qa_questions import QATask

__all__ = ["make_response"]

# Share of rollouts from a reasoning model (a reasoning item precedes the message).
_REASONING_SHARE: Final = 0.15
# How often a right answer is written in the task's canonical form rather than one of its variants.
_CANONICAL_SHARE: Final = 0.55

# --- prose --------------------------------------------------------------------------------------------------
# None of these may contain "answer:" or a \boxed{}: they would become the final answer the judge reads.

_GENERIC_PROSE: Final = (
    "Let me work through this carefully.",
    "First, I will restate what is being asked.",
    "I will double-check the result before committing to it.",
    "There is a common trap here, so I will go slowly.",
    "A rough estimate first helps catch mistakes.",
    "Let me verify this a second way.",
)
# Keyed by the topic names of qa_questions._TOPICS: a topic missing here fails at its first rollout.
_TOPIC_PROSE: Final[dict[str, tuple[str, ...]]] = {
    "arithmetic": (
        "Breaking the numbers into tens and units makes this easier.",
        "Carrying the digits one column at a time gives the result.",
        "The last digit already tells me which candidates are possible.",
    ),
    "fractions": (
        "I need a common denominator first.",
        "Dividing numerator and denominator by their greatest common divisor simplifies it.",
        "Writing both parts over the same denominator keeps it exact.",
    ),
    "units": (
        "The conversion factor is the key step here.",
        "I need to keep track of the units throughout.",
        "Writing the unit next to every number keeps the conversion honest.",
    ),
    "percentages": (
        "A percentage is a fraction of one hundred.",
        "The base of the percentage matters: it is the original value.",
    ),
    "capitals": (
        "Many people confuse the largest city with the capital.",
        "The seat of government settles it.",
    ),
    "chemistry": (
        "Some symbols come from the Latin name of the element.",
        "The periodic table settles this.",
    ),
    "history": (
        "Placing the event in its historical context helps.",
        "I should be careful not to confuse it with a related event a few years apart.",
    ),
    "calendar": (
        "Counting month by month avoids off-by-one errors.",
        "I should check whether the year is a leap year.",
        "Each month has its own length, so I add them one at a time.",
    ),
}
_REASONING_TITLES: Final = (
    "**Working out the {topic} question**",
    "**Checking the calculation**",
    "**Recalling facts**",
)
_SENTENCE_LEADS: Final = ("The answer is ", "So the result is ", "That gives ", "It is ")
_BOX_LEADS: Final = ("", "The answer is ", "So the final answer is ", "Therefore, ")
_NO_ANSWER_ENDINGS: Final = (
    "I am not certain enough to give a final value without more information.",
    "I would need to check a reference to be sure, so I will not guess.",
    "Several values seem plausible and I cannot decide between them.",
)

# --- answer formats -----------------------------------------------------------------------------------------
# (name, weight). Under the judge rule, the whole message counts unless it has a \boxed{} or an "answer:", so
# "sentence" loses even a right answer, as a strict judge would.
_FORMATS: Final[tuple[tuple[str, int], ...]] = (
    ("boxed", 38),  # prose, then \boxed{form}
    ("answer_colon", 12),  # prose, then Answer: form
    ("answer_colon_bold", 4),  # **Answer:** form
    ("final_answer_dollar", 3),  # Final answer: $form$
    ("bare", 10),  # the message is the answer alone
    ("sentence", 9),  # "The answer is form." with or without prose
    ("two_boxes", 4),  # a first \boxed{} it takes back, then the final one
    ("boxed_then_remark", 4),  # \boxed{form} followed by a closing remark
    ("no_answer", 5),  # prose that never concludes
    ("empty", 3),  # an empty message
)
_FORMAT_NAMES: Final = tuple(name for name, _ in _FORMATS)
_FORMAT_CUM_WEIGHTS: Final = tuple(sum(weight for _, weight in _FORMATS[: i + 1]) for i in range(len(_FORMATS)))


def _prose(rng: Random, task: QATask, sentences: int) -> str:
    pool = _GENERIC_PROSE + _TOPIC_PROSE[task.topic]
    # Without replacement: a model rarely repeats a sentence word for word.
    return " ".join(distinct(rng, pool, min(sentences, len(pool))))


def _render(rng: Random, task: QATask, fmt: str, answer: str, correct: bool) -> str:
    """The whole message text for `answer` written in format `fmt`."""
    prose = _prose(rng, task, between(rng, 1, 3))
    retracted = pick(rng, task.wrong) if correct else task.right[0]
    renderers: dict[str, Callable[[], str]] = {
        "boxed": lambda: f"{prose}\n\n{pick(rng, _BOX_LEADS)}\\boxed{{{answer}}}",
        "answer_colon": lambda: f"{prose}\n\nAnswer: {answer}",
        "answer_colon_bold": lambda: f"{prose}\n\n**Answer:** {answer}",
        "final_answer_dollar": lambda: f"{prose}\n\nFinal answer: ${answer}$",
        "bare": lambda: answer,
        "sentence": lambda: (f"{prose} " if rng.random() < 0.7 else "") + f"{pick(rng, _SENTENCE_LEADS)}{answer}.",
        "two_boxes": lambda: (
            f"{prose} At first I got \\boxed{{{retracted}}}, but that was a slip. "
            f"Correcting it gives \\boxed{{{answer}}}"
        ),
        "boxed_then_remark": lambda: f"{prose}\n\n\\boxed{{{answer}}}\n\nI hope the working above is clear.",
        "no_answer": lambda: f"{prose} {pick(rng, _NO_ANSWER_ENDINGS)}",
        "empty": lambda: "",
    }
    return renderers[fmt]()


def make_response(seed: int, task: QATask, rollout: int, dispatch_index: int) -> Row:
    """The Responses API object rollout `rollout` of `task` got back, dispatched `dispatch_index`-th."""
    rng = Random(derived_seed(seed, "qa-rollout", task.index, rollout))
    fmt = rng.choices(_FORMAT_NAMES, cum_weights=_FORMAT_CUM_WEIGHTS)[0]
    correct = rng.random() < task.skill
    if correct:
        answer = task.right[0] if rng.random() < _CANONICAL_SHARE else pick(rng, task.right)
    else:
        answer = pick(rng, task.wrong)
    has_reasoning = rng.random() < _REASONING_SHARE
    hex_id = f"{rng.getrandbits(192):048x}"

    output: list[Row] = []
    reasoning_tokens = 0
    if has_reasoning:
        title = pick(rng, _REASONING_TITLES).format(topic=task.topic)
        summary = title + "\n\n" + _prose(rng, task, between(rng, 2, 5))
        # The summary is a digest: the hidden chain of thought it stands for is several times longer.
        reasoning_tokens = approx_tokens(summary) * between(rng, 3, 8)
        output.append(reasoning_item(f"rs_{rng.getrandbits(192):048x}", summary))
    text = _render(rng, task, fmt, answer, correct)
    output.append(message_item(f"msg_{hex_id}", text))

    return finished_response(rng, hex_id, task.prompt, output, text, reasoning_tokens, dispatch_index)
