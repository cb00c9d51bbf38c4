"""Responses API messages as the judge tests build them."""

from __future__ import annotations

from typing import Any


def message(*texts: str, role: str = "assistant") -> dict[str, Any]:
    return {"type": "message", "role": role, "content": [{"type": "output_text", "text": t} for t in texts]}
