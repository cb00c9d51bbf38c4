"""Keeping secrets out of text: each secret, and any run of ``RUN_CHARS`` or more of its characters, redacted.

A provider that refuses a key often quotes it back masked: all but its last four characters, or its head and its
tail. Redacting only the exact key leaves most of it in what we write, so every stretch of ``RUN_CHARS``
consecutive characters of a secret counts as the secret. A secret shorter than that is redacted only whole.

Fast on long texts (error bodies, whole JSONL rows) for a key of 40 to 100 characters: the secret's 4-character
pieces that start every 5 characters are such that any run of 8 of its characters holds one (the first start in
the run is at most 4 characters in, so that piece ends by the run's 8th character). A text is searched
(``str.find``, in C) for those pieces only, a fifth of the secret's length of them; only around a hit are the
8-character windows looked up in the set of the secret's 8-character pieces. The union of the windows found is
exactly the union of the runs: a longer run is the union of its 8-character windows.
"""

from __future__ import annotations

from collections.abc import Iterable

REDACTED = "[REDACTED]"
RUN_CHARS = 8
_PIECE_CHARS = 4
_PIECE_STEP = RUN_CHARS - _PIECE_CHARS + 1  # pieces start this far apart: a run always holds one whole


class Redactor:
    def __init__(self, secrets: Iterable[str | None]) -> None:
        given = {secret for secret in secrets if secret}
        long = [secret for secret in given if len(secret) >= RUN_CHARS]
        self._windows = frozenset(
            secret[start : start + RUN_CHARS] for secret in long for start in range(len(secret) - RUN_CHARS + 1)
        )
        self._pieces = tuple(
            sorted(
                {
                    secret[start : start + _PIECE_CHARS]
                    for secret in long
                    for start in range(0, len(secret) - _PIECE_CHARS + 1, _PIECE_STEP)
                }
            )
        )
        self._short = tuple(sorted(given.difference(long)))
        # What a UTF-8 line must hold for any secret to be in it (UTF-8 encodes a substring as a substring).
        self._encoded = tuple(text.encode() for text in (*self._pieces, *self._short))

    def __bool__(self) -> bool:
        return bool(self._encoded)

    def __repr__(self) -> str:  # the secrets must not surface through a debugger or a stray f-string
        return f"Redactor({len(self._pieces) + len(self._short)} pieces)"

    def __call__(self, text: str) -> str:
        """``text`` with each stretch of secret replaced by ``REDACTED``; ``text`` itself when it holds none."""
        spans = self._spans(text)
        if not spans:
            return text
        parts, written = [], 0
        for start, end in _merged(spans):
            parts += [text[written:start], REDACTED]
            written = end
        parts.append(text[written:])
        return "".join(parts)

    def line(self, data: bytes) -> bytes:
        """A UTF-8 line (a JSONL row) redacted; the same object when it holds no secret, found without decoding."""
        if not any(piece in data for piece in self._encoded):
            return data
        text = data.decode(errors="surrogateescape")
        redacted = self(text)
        return data if redacted is text else redacted.encode(errors="surrogateescape")

    def _spans(self, text: str) -> list[tuple[int, int]]:
        spans = []
        for piece in self._pieces:
            at = text.find(piece)
            while at != -1:
                for start in range(max(0, at - _PIECE_STEP + 1), at + 1):
                    if text[start : start + RUN_CHARS] in self._windows:
                        spans.append((start, start + RUN_CHARS))
                at = text.find(piece, at + 1)
        for secret in self._short:
            at = text.find(secret)
            while at != -1:
                spans.append((at, at + len(secret)))
                at = text.find(secret, at + 1)
        return spans


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Overlapping and touching spans as one: a key quoted whole is one ``REDACTED``, not one per window."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged
