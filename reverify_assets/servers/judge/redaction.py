"""Keeping the judge API key out of every message, row and log line this server produces."""

from __future__ import annotations

REDACTED = "[REDACTED]"


class Redactor:
    """Replaces the secret wherever it shows up: a provider may echo the key back in an error body."""

    def __init__(self, secret: str | None) -> None:
        self._secret = secret or None

    def __call__(self, text: str) -> str:
        if self._secret is None or self._secret not in text:
            return text
        return text.replace(self._secret, REDACTED)

    def __repr__(self) -> str:  # the key must not surface through a debugger or a stray f-string either
        return f"Redactor(secret={'set' if self._secret else 'unset'})"
