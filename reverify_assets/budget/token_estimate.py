"""Prompt tokens for a dry run's cost: counted by tiktoken where it is installed, else estimated from the length.

tiktoken (``o200k_base``, the encoding of OpenAI's current models) counts exactly for OpenAI's models and
closely for others; it needs its encoding file, which it downloads once, so a machine without it, or offline,
falls back to the approximation: one token per four characters, rounded up, OpenAI's own rule of thumb for
English text (code and non-Latin scripts run to more tokens than that).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import cache

CHARS_PER_TOKEN = 4
TIKTOKEN_ENCODING = "o200k_base"


class TokenCounter:
    def __init__(self) -> None:
        self._encode: Callable[[str], list[int]] | None = _tiktoken_encoder()
        self.method = (
            f"tiktoken {TIKTOKEN_ENCODING}"
            if self._encode is not None
            else f"estimated: 1 token per {CHARS_PER_TOKEN} characters (tiktoken is not installed here)"
        )

    def count(self, text: str) -> int:
        if self._encode is not None:
            return len(self._encode(text))
        return math.ceil(len(text) / CHARS_PER_TOKEN)


def _tiktoken_encoder() -> Callable[[str], list[int]] | None:
    try:
        import tiktoken
    except ImportError:
        return None
    try:
        encoding = tiktoken.get_encoding(TIKTOKEN_ENCODING)
    except Exception:  # its encoding file could not be had (offline): the estimate instead
        return None
    return lambda text: encoding.encode(text, disallowed_special=())


@cache
def token_counter() -> TokenCounter:
    """The process's one counter: tiktoken's encoding is loaded once."""
    return TokenCounter()
