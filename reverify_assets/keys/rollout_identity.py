"""Whether two rows are of the same rollout: the prompt each carries and, between two scorings, the response.

The join pairs a rollout with the input row of the same ``(_ng_task_index, _ng_rollout_index)``. Keys alone
pair another dataset's rollouts just as well (two runs number their tasks from 0), and scoring them gives a
confident, meaningless reward. What NeMo Gym 0.7.0 writes into both files (``rollout_collection.py``): the
materialized input row is the row it sent, and the rollout is the agent's ``/run`` result, whose
``responses_create_params`` is the request the agent made of the model, passed through NeMo Gym's pydantic
models. Those add defaulted fields (``background: null``, ``include: null``, ...), give each message
``type: "message"`` and each image part ``detail: "auto"``, and re-order keys; a materialized taskset row
(``episode_types.py``) keeps the same request under ``task_input``. What survives all of it is the prompt's
text: each message's content, each content part's text, image or file, each tool call's name and arguments
and each tool output, in order.

The key scans compute a 64-bit fingerprint of that text for every row as they pass it (XXH3 of its parts), the
join compares the fingerprints of the pairs it makes, and only a mismatch reads the two
rows again, to show the difference. A row without a prompt (no ``responses_create_params.input``) has
fingerprint 0 and is never compared. ``allow_prompt_mismatch`` (``--allow-prompt-mismatch``) turns the check
off, for an agent that rewrites its prompt.

What a mismatch then does (read again, confirmed, shown as a diff; the first rows compared before any server
starts) is ``rollout_mismatch``'s.

Two scorings of the same rollouts (``reverify compare``) carry the prompt of the same input row, whatever
rollouts they scored: there the response's text (``response.output``, fingerprinted the same way) tells
whether two rows are of one rollout.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import simdjson
from xxhash import xxh3_64_intdigest

NO_TEXT = 0  # the fingerprint of a row without a prompt (or a response), never compared
ALLOW_KEY = "allow_prompt_mismatch"  # a top-level config knob, as merge_shards is
ALLOW_FLAG = "--allow-prompt-mismatch"
PROMPT_FIELD, INPUT_FIELD, TASK_INPUT_FIELD = "responses_create_params", "input", "task_input"
# What the message of a content part or an item that is no message carries: the values NeMo Gym never defaults.
_PART_FIELDS = ("text", "image_url", "file_data", "file_url", "file_id", "filename")
_ITEM_FIELDS = ("name", "arguments", "output")
RESPONSE_FIELD, OUTPUT_FIELD, SUMMARY_FIELD = "response", "output", "summary"
USER = "user"
USER_SHIFT = 31  # a prompt fingerprint's low bits are its first user message's
USER_BITS = (1 << USER_SHIFT) - 1
_OBJECTS = (dict, simdjson.Object)
_ARRAYS = (list, simdjson.Array)


def allows_prompt_mismatch(config: Mapping[str, Any]) -> bool:
    return bool(config.get(ALLOW_KEY, False))


def prompt_of(row: Any) -> Any:
    """The prompt of a row (a dict, or a simdjson object as the key scans hold it), or None."""
    params = row.get(PROMPT_FIELD)
    if params is None and type(task := row.get(TASK_INPUT_FIELD)) in _OBJECTS:
        params = task.get(PROMPT_FIELD)
    return params.get(INPUT_FIELD) if type(params) in _OBJECTS else None


def text_parts(items: Any) -> Iterator[str]:
    """The strings a prompt's or a response's items are fingerprinted by, in order (see the module doc)."""
    if type(items) is str:
        yield items
        return
    if type(items) not in _ARRAYS:
        return
    for item in items:
        if type(item) is str:
            yield item
        elif type(item) in _OBJECTS:
            yield from _item_parts(item)


def _item_parts(item: Any) -> Iterator[str]:
    content = item.get("content")
    if type(content) is str:
        yield content
    elif type(content) in _ARRAYS:
        for part in content:
            if type(part) is str:
                yield part
            elif type(part) in _OBJECTS:
                yield from _strings(part, _PART_FIELDS)
    elif content is None:
        yield from _strings(item, _ITEM_FIELDS)
        if type(summary := item.get(SUMMARY_FIELD)) in _ARRAYS:  # a reasoning item's
            for part in summary:
                if type(part) in _OBJECTS and type(text := part.get("text")) is str:
                    yield text


def _strings(container: Any, fields: tuple[str, ...]) -> Iterator[str]:
    for field in fields:
        if type(value := container.get(field)) is str:
            yield value


def prompt_fingerprint(row: Any) -> int:
    """The fingerprint of a row's prompt (see the module doc), a signed 64-bit integer: 32 bits of what comes
    before the first user message, then 31 of that message (0 when there is none); NO_TEXT for a row without a
    prompt. ``key_index.mismatched_prompts`` compares them. Each part is hashed by XXH3 seeded with the digest
    of the parts before it: one call a part, and ["ab"] is not ["a", "b"]. The key scans take ``PromptShape``'s
    short way to the same fingerprint."""
    return _walked(row)[0]


def _walked(row: Any) -> tuple[int, int | None]:
    """The fingerprint, and the index of the prompt's first user message (None: it has none, or is a string)."""
    items = prompt_of(row)
    if type(items) is str:
        return _packed(0, _hashed(items, 0)), None
    if type(items) not in _ARRAYS:
        return NO_TEXT, None
    digest = head = 0
    for at, item in enumerate(items):
        if type(item) not in _OBJECTS:
            digest = _hashed(item, digest) if type(item) is str else digest
            continue
        role = item.get("role")
        if role == USER:  # what came before is the head; the first user message is hashed on its own
            head, digest = digest, 0
        content = item.get("content")
        if type(content) is str:
            digest = _hashed(content, digest)
        else:
            for part in _item_parts(item):
                digest = _hashed(part, digest)
        if role == USER:
            return _packed(head, digest), at
    return _packed(digest, None), None


class PromptShape:
    """``prompt_fingerprint`` of a key scan's rows, the short way for the rows shaped as the last one walked.

    A dataset's prompts share a shape: the first user message at the same index, after messages of text (a
    system prompt). Walking a rollout's items through simdjson took 1.5 µs a row, reading the strings the
    fingerprint needs by their JSON pointers 1.0 µs, by index 0.85 µs (the rest of the rollout's scan: 3.0 µs). A
    row of another shape (the role at that index is not the user's, a content is not text, the prompt is shorter)
    is walked, and its shape is learned. The short way skips the role checks of the messages before the user's:
    should one of them be a user message, both files' rows give the hashes of the same messages, and a pair whose
    two differ is read again before it is called a mismatch (``rollout_mismatch.confirmed_mismatches``)."""

    def __init__(self) -> None:
        self._head: range = range(0)  # the indexes of the messages before the user's
        self._user: int | None = None  # the index of the user's message

    def fingerprint(self, row: simdjson.Object) -> int:
        # ``_walked``'s hashing and ``_packed``, spelled out: at a million rows a function call here costs a tenth
        # of a second.
        user = self._user
        if user is not None:
            try:
                items = row[PROMPT_FIELD][INPUT_FIELD]
                item = items[user]
                if item["role"] == USER:
                    head = 0
                    for at in self._head:
                        head = xxh3_64_intdigest(items[at]["content"].encode(), head)
                    digest = xxh3_64_intdigest(item["content"].encode(), 0)
                    return (head >> 32 or (1 if head else 0)) << USER_SHIFT | (digest & USER_BITS or 1)
            except (KeyError, TypeError, IndexError, AttributeError):
                pass  # no such item, a content that is not text: walked
        fingerprint, user_at = _walked(row)
        self._head, self._user = range(user_at or 0), user_at
        return fingerprint


def response_fingerprint(row: Mapping[str, Any]) -> int:
    """The fingerprint of the text of a row's response (its ``output`` items, as a prompt's parts); NO_TEXT if
    it has none. Two are the same response when equal."""
    response = row.get(RESPONSE_FIELD)
    digest = 0
    for part in text_parts(response.get(OUTPUT_FIELD) if isinstance(response, dict) else None):
        digest = _hashed(part, digest)
    return digest >> 1 or (1 if digest else NO_TEXT)


def _hashed(text: str, seed: int) -> int:
    return xxh3_64_intdigest(text.encode(), seed)  # simdjson and orjson refuse lone surrogates: it encodes


def _packed(head: int, user: int | None) -> int:
    """``user``: None for a prompt without a user message, the only one whose low bits are 0. A head digest of 0
    (no text before the user message) stays 0 in its bits; any other is never 0 there."""
    head_bits = head >> 32 or (1 if head else 0)
    user_bits = 0 if user is None else user & USER_BITS or 1
    return head_bits << USER_SHIFT | user_bits


def prompt_text(row: Mapping[str, Any]) -> str:
    return "\n".join(text_parts(prompt_of(row)))


def response_text(row: Mapping[str, Any]) -> str:
    response = row.get(RESPONSE_FIELD)
    return "\n".join(text_parts(response.get(OUTPUT_FIELD) if isinstance(response, dict) else None))
