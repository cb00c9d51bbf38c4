"""What the judge is asked: the question, the expected answer and the candidate, filled into a template.

Extraction follows NeMo Gym's ``equivalence_llm_judge``: the candidate is the text of the *last* assistant
message of the response (its text parts joined with newlines, stripped), optionally narrowed by a regex;
the question is the last user message of ``responses_create_params.input``, optionally narrowed the same way.

The default template wraps the two answers in fixed markers. The local judge model
(:mod:`reverify_assets.local_judge`) reads the answers from those markers, so a custom template must keep
them for that model to work; a real LLM judge does not care.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

PLACEHOLDERS = ("question", "expected_answer", "generated_answer")

ANSWER_A_START = "<|Start of Answer A|>"
ANSWER_A_END = "<|End of Answer A|>"
ANSWER_B_START = "<|Start of Answer B|>"
ANSWER_B_END = "<|End of Answer B|>"

# In the style of NeMo Gym's equivalence/math judge prompts (adapted from Arena Hard): the expected
# answer is A, the candidate B, and the reply must end with one of the two verdict labels.
DEFAULT_PROMPT_TEMPLATE = (
    "Please act as an impartial judge and decide whether two answers to the question below are "
    "equivalent. Answer A is the reference answer; answer B is the answer to be judged.\n\n"
    "Consider only whether the two answers state the same value, entity or claim for this question. "
    "Ignore differences in formatting, wording, LaTeX notation and any explanation around the answer. "
    "Do not judge which answer is better, and do not solve the question yourself.\n\n"
    "After evaluating the two answers, you must output exactly one of the following verdict labels:\n\n"
    "1. The answers are equivalent: [[A=B]]\n"
    "2. The answers are different: [[A!=B]]\n\n"
    'Example output: "My final verdict is different [[A!=B]]".\n\n'
    "<|Question|>\n{question}\n\n"
    f"{ANSWER_A_START}\n{{expected_answer}}\n{ANSWER_A_END}\n\n"
    f"{ANSWER_B_START}\n{{generated_answer}}\n{ANSWER_B_END}"
)


def check_template(template: str) -> None:
    """Raise ValueError unless ``template`` formats with our placeholders and names both answers."""
    try:
        template.format(**dict.fromkeys(PLACEHOLDERS, ""))
    except (KeyError, IndexError, ValueError) as exc:
        raise ValueError(
            "prompt_template must use only the placeholders {question}, {expected_answer} and "
            f"{{generated_answer}}, with other braces doubled ({{{{ }}}}): {type(exc).__name__}: {exc}"
        ) from exc
    missing = [name for name in ("expected_answer", "generated_answer") if f"{{{name}}}" not in template]
    if missing:
        raise ValueError(f"prompt_template lacks {', '.join('{' + m + '}' for m in missing)}")


def fill_prompt(template: str, *, question: str, expected_answer: str, generated_answer: str) -> str:
    # str.format does not re-scan substituted values, so braces inside answers are safe.
    return template.format(question=question, expected_answer=expected_answer, generated_answer=generated_answer)


def judge_messages(system_message: str | None, user_prompt: str) -> list[dict[str, str]]:
    messages = [{"role": "system", "content": system_message}] if system_message else []
    messages.append({"role": "user", "content": user_prompt})
    return messages


def _text_parts(content: Any) -> list[str]:
    """Text of a message's content: a string, or the ``text`` of each part of a content list."""
    if isinstance(content, str):
        return [content]
    if isinstance(content, Sequence):
        return [part["text"] for part in content if isinstance(part, Mapping) and isinstance(part.get("text"), str)]
    return []


def last_assistant_text(response: Mapping[str, Any]) -> str:
    """The last assistant message's text, parts joined with newlines and stripped; "" when there is none.

    Reasoning and tool items are skipped; an earlier assistant message never stands in for an empty last one.
    """
    output = response.get("output")
    if not isinstance(output, Sequence) or isinstance(output, str):
        return ""
    for item in reversed(output):
        if isinstance(item, Mapping) and item.get("type") == "message" and item.get("role") == "assistant":
            return "\n".join(_text_parts(item.get("content"))).strip()
    return ""


def last_user_text(responses_create_params: Any) -> str:
    """The last user message of the policy's input (a plain string input is the user's message itself)."""
    if not isinstance(responses_create_params, Mapping):
        return ""
    model_input = responses_create_params.get("input")
    if isinstance(model_input, str):
        return model_input.strip()
    last = ""
    if isinstance(model_input, Sequence):
        for item in model_input:
            if isinstance(item, Mapping) and item.get("role") == "user":
                texts = _text_parts(item.get("content"))
                if texts:
                    last = "\n".join(texts)
    return last.strip()


def narrow(text: str, pattern: str | None) -> str:
    """NeMo Gym's regex narrowing: the last match's first non-empty group, else the whole match, stripped.

    No pattern, an invalid pattern or no match leave the text as it is.
    """
    if not pattern or not text:
        return text
    try:
        matches = list(re.finditer(pattern, text, flags=re.MULTILINE | re.DOTALL))
    except re.error:
        return text
    if not matches:
        return text
    last = matches[-1]
    for group in last.groups():
        if isinstance(group, str) and group.strip():
            return group.strip()
    return last.group(0).strip()
