"""NaN and infinities as NeMo Gym's HTTP answers carry them: JSON null (pydantic's default)."""

from __future__ import annotations

import math
from typing import Any


def json_number(value: Any) -> Any:
    """`value`, or None for a non-finite float."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def json_safe(value: Any) -> Any:
    """`value` with every non-finite float, however deep in dicts, lists and tuples, made None."""
    if isinstance(value, float):
        return json_number(value)
    if isinstance(value, dict):
        return {key: json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(item) for item in value]
    return value
