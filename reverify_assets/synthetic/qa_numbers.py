"""Exact text forms of numbers and quantities, the ways a model writes the same value ("0.375", "4,096", "12 cm").

Shared by the question makers (``qa_questions``), which build both the canonical answer and its variants from
these, so the canonical form and the variants can never disagree about a value.
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction


def decimal_text(value: Fraction) -> str:
    """Exact decimal form of a terminating fraction ("0.375", "12", "-2.5"), never scientific notation."""
    if value.denominator == 1:
        return str(value.numerator)
    text = format(Decimal(value.numerator) / Decimal(value.denominator), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def terminates(value: Fraction) -> bool:
    q = value.denominator
    for prime in (2, 5):
        while q % prime == 0:
            q //= prime
    return q == 1


def fraction_text(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"


def rounded(value: Fraction, places: int) -> str:
    return f"{float(value):.{places}f}"


def scientific(value: int) -> str:
    """4096 -> "4.096e3": what some models write for large integers (exact, so a number judge accepts it)."""
    digits = str(abs(value)).rstrip("0") or "0"
    exponent = len(str(abs(value))) - 1
    mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    return f"{'-' if value < 0 else ''}{mantissa}e{exponent}"


def integer_forms(value: int) -> list[str]:
    forms = [str(value)]
    if abs(value) >= 1000:
        forms += [f"{value:,}", scientific(value)]
    if value < 0:
        forms.append(f"\u2212{-value}")  # the Unicode minus some tokenizers prefer
    forms += [f"{value}.0", f"\\text{{{value}}}"]
    return forms


def quantity_forms(value: str, symbol: str, name: str) -> list[str]:
    return [
        f"{value} {symbol}",
        f"{value}{symbol}",
        value,
        f"{value} {name}",
        f"{value}\\text{{ {symbol}}}",
        f"{value} \\mathrm{{{symbol}}}",
    ]
