"""Synthetic free-form QA rollouts in NeMo Gym's file formats, for the LLM-judge flow (``equivalence_judge``).

Writes the pair `gym eval run` leaves behind for a short-answer QA environment graded by an equivalence
judge (docs/nemo-gym-contract.md §2.1, §2.2): `rollouts_materialized_inputs.jsonl` in dispatch order and
`rollouts.jsonl` in a seeded completion order. Questions have short exact answers of many kinds (integers,
fractions, quantities with units, percentages, capitals, chemical symbols, years, dates, weekdays), and the
rollouts answer them in the forms real models produce (`\\boxed{\\frac{1}{2}}`, `Answer: 0.5`, `12cm`,
"The answer is 42.", an empty message, ...), right or wrong, so the judge has real work to do.

Each rollout stores what the original verifier gave it: the `equivalence_judge` server with its default
config asking the local judge model (`reverify judge-serve`), i.e. the same prompt, the reply of
`reverify_assets.judge_model.verdict_rule` and the reward read from that reply. Re-verifying the files
against a healthy local judge therefore reproduces every stored reward.

Every row is a pure function of the spec and its `(task index, rollout index)` key, so both files are
streamed (memory is constant in the number of rows) and byte-identical for a given seed.

    python -m reverify_assets.synthetic.qa_rollouts --tasks 50 --rollouts-per-task 4 --seed 11 --out DIR
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import Decimal
from fractions import Fraction
from math import gcd
from pathlib import Path
from random import Random
from typing import Final

from reverify_assets.judge_model.verdict_rule import verdict_reply
from reverify_assets.servers.judge.config import EquivalenceJudgeConfig
from reverify_assets.servers.judge.prompt import fill_prompt, judge_messages, last_assistant_text
from reverify_assets.servers.judge.verdict import parse_verdict
from reverify_assets.synthetic.mcqa_rollouts import INPUTS_FILE_NAME, ROLLOUTS_FILE_NAME, SyntheticSpec
from reverify_assets.synthetic.nemo_gym_rows import (
    CHAT_TEMPLATE_TOKENS,
    EPOCH,
    RESULT_TYPE,
    Row,
    agent_ref,
    approx_tokens,
    between,
    completion_order,
    derived_seed,
    distinct,
    message_item,
    pick,
    positive_int,
    reasoning_item,
    response_object,
    responses_create_params,
    write_jsonl_atomically,
)

__all__ = [
    "DEFAULT_AGENT_NAME",
    "INPUTS_FILE_NAME",
    "ROLLOUTS_FILE_NAME",
    "QASpec",
    "iter_input_rows",
    "iter_rollout_rows",
    "main",
    "write_qa_dataset",
]

DEFAULT_AGENT_NAME: Final = "qa_simple_agent"


@dataclass(frozen=True)
class QASpec(SyntheticSpec):
    agent_name: str = DEFAULT_AGENT_NAME


# --- constants ----------------------------------------------------------------------------------------------

_ENVIRONMENT_SERVER: Final = "qa_environment_server"
# The judge the original run used: the equivalence_judge server's defaults (configs/judge.yaml changes only
# where it points and how it retries, none of which reaches a stored row).
_JUDGE: Final = EquivalenceJudgeConfig()

# Share of rollouts from a reasoning model (a reasoning item precedes the message).
_REASONING_SHARE: Final = 0.15
# How often a right answer is written in the task's canonical form rather than one of its variants.
_CANONICAL_SHARE: Final = 0.55

# Four prompt styles of short-answer benchmarks; the model's answer format does not always follow them.
_PROMPTS: Final[tuple[tuple[str, str], ...]] = (
    ("", ""),
    ("Answer the following question. Put your final answer inside \\boxed{}.\n\n", ""),
    ("", "\nGive only the final answer, as briefly as possible."),
    (
        "Solve the problem below. Think step by step, then write your final answer on its own line as "
        '"Answer: <answer>".\n\n',
        "",
    ),
)

# --- facts --------------------------------------------------------------------------------------------------

# (country, capital, the city most often given instead, usually the largest one)
_CAPITALS: Final[tuple[tuple[str, str, str], ...]] = (
    ("Australia", "Canberra", "Sydney"), ("Canada", "Ottawa", "Toronto"), ("Turkey", "Ankara", "Istanbul"),
    ("Brazil", "Brasília", "Rio de Janeiro"), ("Switzerland", "Bern", "Zurich"),
    ("New Zealand", "Wellington", "Auckland"), ("Nigeria", "Abuja", "Lagos"), ("Morocco", "Rabat", "Casablanca"),
    ("Vietnam", "Hanoi", "Ho Chi Minh City"), ("India", "New Delhi", "Mumbai"),
    ("Pakistan", "Islamabad", "Karachi"), ("the United States", "Washington, D.C.", "New York"),
    ("Japan", "Tokyo", "Kyoto"), ("Germany", "Berlin", "Bonn"), ("Italy", "Rome", "Milan"),
    ("Spain", "Madrid", "Barcelona"), ("France", "Paris", "Lyon"), ("Egypt", "Cairo", "Alexandria"),
    ("Kenya", "Nairobi", "Mombasa"), ("Argentina", "Buenos Aires", "Córdoba"), ("Colombia", "Bogotá", "Medellín"),
    ("Peru", "Lima", "Cusco"), ("Chile", "Santiago", "Valparaíso"), ("Mexico", "Mexico City", "Guadalajara"),
    ("South Korea", "Seoul", "Busan"), ("China", "Beijing", "Shanghai"), ("Russia", "Moscow", "Saint Petersburg"),
    ("Norway", "Oslo", "Bergen"), ("Sweden", "Stockholm", "Gothenburg"), ("Finland", "Helsinki", "Turku"),
    ("Poland", "Warsaw", "Kraków"), ("Portugal", "Lisbon", "Porto"), ("Greece", "Athens", "Thessaloniki"),
    ("Ireland", "Dublin", "Cork"), ("Ethiopia", "Addis Ababa", "Dire Dawa"), ("Ghana", "Accra", "Kumasi"),
    ("Thailand", "Bangkok", "Chiang Mai"), ("Iceland", "Reykjavík", "Akureyri"), ("Austria", "Vienna", "Salzburg"),
    ("Saudi Arabia", "Riyadh", "Jeddah"), ("Cuba", "Havana", "Santiago de Cuba"), ("Hungary", "Budapest", "Debrecen"),
)  # fmt: skip

# (name, symbol, atomic number)
_ELEMENTS: Final[tuple[tuple[str, str, int], ...]] = (
    ("hydrogen", "H", 1), ("helium", "He", 2), ("lithium", "Li", 3), ("carbon", "C", 6), ("nitrogen", "N", 7),
    ("oxygen", "O", 8), ("fluorine", "F", 9), ("neon", "Ne", 10), ("sodium", "Na", 11), ("magnesium", "Mg", 12),
    ("aluminium", "Al", 13), ("silicon", "Si", 14), ("phosphorus", "P", 15), ("sulfur", "S", 16),
    ("chlorine", "Cl", 17), ("potassium", "K", 19), ("calcium", "Ca", 20), ("iron", "Fe", 26),
    ("copper", "Cu", 29), ("zinc", "Zn", 30), ("silver", "Ag", 47), ("tin", "Sn", 50), ("iodine", "I", 53),
    ("tungsten", "W", 74), ("gold", "Au", 79), ("mercury", "Hg", 80), ("lead", "Pb", 82), ("uranium", "U", 92),
)  # fmt: skip

# (what happened, year)
_EVENTS: Final[tuple[tuple[str, int], ...]] = (
    ("did the Berlin Wall fall", 1989), ("did Apollo 11 land on the Moon", 1969),
    ("did the Second World War end", 1945), ("did the storming of the Bastille take place", 1789),
    ("was the Magna Carta sealed", 1215), ("did Columbus first reach the Americas", 1492),
    ("was the United States Declaration of Independence adopted", 1776), ("did the Titanic sink", 1912),
    ("was the Battle of Hastings fought", 1066), ("did Constantinople fall to the Ottomans", 1453),
    ("was the Treaty of Versailles signed", 1919), ("did the Chernobyl disaster happen", 1986),
    ("was Sputnik 1 launched", 1957), ("did the Wright brothers make their first powered flight", 1903),
    ("did euro banknotes and coins enter circulation", 2002), ("did the First World War begin", 1914),
    ("did Nelson Mandela become President of South Africa", 1994), ("was the first iPhone released", 2007),
)  # fmt: skip

_MONTHS: Final = (
    "January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November",
    "December",
)  # fmt: skip
_WEEKDAYS: Final = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")

# (quantity, from symbol, to symbol, to-unit spelled out, factor). Every factor is a terminating decimal, so
# every converted value has an exact decimal form.
_CONVERSIONS: Final[tuple[tuple[str, str, str, str, Fraction], ...]] = (
    ("length", "m", "cm", "centimetres", Fraction(100)), ("length", "km", "m", "metres", Fraction(1000)),
    ("length", "cm", "mm", "millimetres", Fraction(10)), ("length", "in", "cm", "centimetres", Fraction(254, 100)),
    ("length", "ft", "in", "inches", Fraction(12)), ("mass", "kg", "g", "grams", Fraction(1000)),
    ("mass", "g", "mg", "milligrams", Fraction(1000)), ("volume", "L", "mL", "millilitres", Fraction(1000)),
    ("time", "h", "min", "minutes", Fraction(60)), ("time", "min", "s", "seconds", Fraction(60)),
)  # fmt: skip
_UNIT_NAMES: Final = {
    "m": "metres", "km": "kilometres", "cm": "centimetres", "in": "inches", "ft": "feet", "kg": "kilograms",
    "g": "grams", "L": "litres", "h": "hours", "min": "minutes",
}  # fmt: skip
# (bigger unit, smaller unit, how many smaller in one bigger)
_COUNTS: Final[tuple[tuple[str, str, int], ...]] = (
    ("day", "seconds", 86_400), ("week", "minutes", 10_080), ("week", "hours", 168), ("day", "minutes", 1_440),
    ("hour", "milliseconds", 3_600_000), ("year of 365 days", "hours", 8_760),
)  # fmt: skip

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


# --- number formatting --------------------------------------------------------------------------------------


def _decimal(value: Fraction) -> str:
    """Exact decimal form of a terminating fraction ("0.375", "12", "-2.5"), never scientific notation."""
    if value.denominator == 1:
        return str(value.numerator)
    text = format(Decimal(value.numerator) / Decimal(value.denominator), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def _terminates(value: Fraction) -> bool:
    q = value.denominator
    for prime in (2, 5):
        while q % prime == 0:
            q //= prime
    return q == 1


def _fraction_text(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"


def _rounded(value: Fraction, places: int) -> str:
    return f"{float(value):.{places}f}"


def _scientific(value: int) -> str:
    """4096 -> "4.096e3": what some models write for large integers (exact, so a number judge accepts it)."""
    digits = str(abs(value)).rstrip("0") or "0"
    exponent = len(str(abs(value))) - 1
    mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    return f"{'-' if value < 0 else ''}{mantissa}e{exponent}"


# --- per-task content ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Task:
    index: int
    uuid: str
    topic: str
    question: str
    prompt: str
    expected_answer: str
    right: tuple[str, ...]  # ways to write the right answer; [0] is the canonical one
    wrong: tuple[str, ...]  # plausible mistakes
    # Chance that a rollout gets it right; varying it per task makes pass@k differ from pass@1.
    skill: float


Content = tuple[str, str, list[str], list[str]]  # question, expected answer, right forms, wrong forms


def _integer_forms(value: int) -> list[str]:
    forms = [str(value)]
    if abs(value) >= 1000:
        forms += [f"{value:,}", _scientific(value)]
    if value < 0:
        forms.append(f"\u2212{-value}")  # the Unicode minus some tokenizers prefer
    forms += [f"{value}.0", f"\\text{{{value}}}"]
    return forms


def _arithmetic(rng: Random) -> Content:
    kind = pick(rng, ("add", "sub", "mul", "div", "pow"))
    if kind == "add":
        a, b = between(rng, 100, 9999), between(rng, 100, 9999)
        question, value, slips = f"What is {a} + {b}?", a + b, [a + b + 10, a + b - 100, a + b + 1]
    elif kind == "sub":
        a, b = between(rng, 10, 999), between(rng, 10, 999)
        question, value, slips = f"What is {a} - {b}?", a - b, [b - a, a - b + 10, a - b - 1]
    elif kind == "mul":
        a, b = between(rng, 12, 99), between(rng, 3, 99)
        question, value, slips = f"What is {a} × {b}?", a * b, [a * (b + 1), a * b + 10, a * (b - 1)]
    elif kind == "div":
        b, q = between(rng, 2, 25), between(rng, 3, 99)
        question, value, slips = f"What is {b * q} ÷ {b}?", q, [q + 1, q - 1, b * q - b]
    else:
        base, exponent = pick(rng, ((2, between(rng, 8, 20)), (3, between(rng, 3, 9))))
        value = base**exponent
        question, slips = f"What is {base}^{exponent}?", [base ** (exponent - 1), base * exponent, value + base]
    return question, str(value), _integer_forms(value), [str(s) for s in slips if s != value]


def _fractions(rng: Random) -> Content:
    kind = pick(rng, ("simplify", "add", "to_decimal", "to_fraction"))
    q = pick(rng, (2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 25))
    p = pick(rng, [n for n in range(1, q) if gcd(n, q) == 1])
    value = Fraction(p, q)
    wrong: list[Fraction | str] = [Fraction(q, p), Fraction(p + 1, q)]
    if kind == "simplify":
        k = between(rng, 2, 6)
        question, expected = f"Simplify {k * p}/{k * q} to lowest terms.", _fraction_text(value)
        wrong.append(Fraction(p, q * k))
    elif kind == "add":
        # Two fractions whose sum is p/q: a classic slip adds numerators and denominators.
        m = between(rng, 2, 3)
        first = Fraction(between(rng, 1, p * m - 1), q * m)
        second = value - first
        question, expected = f"What is {_fraction_text(first)} + {_fraction_text(second)}?", _fraction_text(value)
        wrong.append(Fraction(first.numerator + second.numerator, first.denominator + second.denominator))
    elif kind == "to_decimal" and _terminates(value):
        question, expected = f"Write {p}/{q} as a decimal.", _decimal(value)
        wrong.append(f"{p}.{q}")
    else:
        if not _terminates(value):
            value, p, q = Fraction(3, 8), 3, 8
        question, expected = f"Write {_decimal(value)} as a fraction in lowest terms.", _fraction_text(value)
        wrong.append(Fraction(p * 10, q))
    right = [expected, _fraction_text(value), f"\\frac{{{p}}}{{{q}}}", f"{p} / {q}", f"{2 * p}/{2 * q}"]
    if _terminates(value):
        right += [_decimal(value), _decimal(value).replace("0.", ".", 1)]
    else:
        # Rounded decimals are "right" to a lenient grader and wrong to an exact one: the judge rule's call.
        right += [_rounded(value, 3), _rounded(value, 2)]
    wrong_texts = [w if isinstance(w, str) else _fraction_text(w) for w in wrong]
    return question, expected, right, [w for w in wrong_texts if Fraction(w) != value]


def _quantity_forms(value: str, symbol: str, name: str) -> list[str]:
    return [
        f"{value} {symbol}",
        f"{value}{symbol}",
        value,
        f"{value} {name}",
        f"{value}\\text{{ {symbol}}}",
        f"{value} \\mathrm{{{symbol}}}",
    ]


def _units(rng: Random) -> Content:
    kind = pick(rng, ("convert", "convert", "convert", "temperature", "speed", "count"))
    with_unit = rng.random() < 0.7
    if kind == "temperature":
        celsius = 5 * between(rng, -8, 40)
        fahrenheit = celsius * 9 // 5 + 32
        if rng.random() < 0.5:
            question = f"Convert {fahrenheit} °F to degrees Celsius."
            value, symbol, name = celsius, "°C", "degrees Celsius"
            slips = [_rounded(Fraction(fahrenheit * 5, 9), 1), str(fahrenheit - 32)]
        else:
            question = f"Convert {celsius} °C to degrees Fahrenheit."
            value, symbol, name = fahrenheit, "°F", "degrees Fahrenheit"
            slips = [_rounded(Fraction(celsius * 9, 5), 1), str(celsius + 32)]
        text = str(value)
        right = [*_quantity_forms(text, symbol, name), f"{text} ℃" if symbol == "°C" else f"{text}°", f"{text} C"]
        return question, f"{text} {symbol}" if with_unit else text, right, [f"{s} {symbol}" for s in slips]
    if kind == "speed":
        speed, hours = between(rng, 30, 120), Fraction(between(rng, 2, 12), 4)
        distance = speed * hours
        if not _terminates(distance):
            hours, distance = Fraction(2), Fraction(speed * 2)
        question = f"A train covers {_decimal(distance)} km in {_decimal(hours)} hours. What is its average speed?"
        text = str(speed)
        right = [*_quantity_forms(text, "km/h", "kilometres per hour"), f"{text} km/hr", f"{text} kph"]
        slips = [_rounded(distance / (hours + 1), 1), _decimal(distance * hours)]
        return question, f"{text} km/h" if with_unit else text, right, [f"{s} km/h" for s in slips]
    if kind == "count":
        big, small, factor = pick(rng, _COUNTS)
        count = between(rng, 1, 9)
        value = count * factor
        plural = big if count == 1 else ("years of 365 days" if big.startswith("year") else big + "s")
        question = f"How many {small} are there in {'a' if count == 1 else count} {plural}?"
        right = [*_integer_forms(value), f"{value:,}".replace(",", " "), f"{value} {small}"]
        return question, str(value), right, [str(value * 10), str(value // 10), str(factor * (count + 1))]
    _, source, target, name, factor = pick(rng, _CONVERSIONS)
    amount = Fraction(between(rng, 1, 999), pick(rng, (1, 10, 100)))
    value = _decimal(amount * factor)
    question = f"Convert {_decimal(amount)} {source} to {name}."
    if rng.random() < 0.4:
        question = f"How many {name} are there in {_decimal(amount)} {_UNIT_NAMES[source]}?"
    wrong = [
        f"{_decimal(amount * factor * 10)} {target}",
        f"{_decimal(amount * factor / 10)} {target}",
        f"{value} {source}",
        f"{_decimal(amount / factor) if _terminates(amount / factor) else _rounded(amount / factor, 2)} {target}",
    ]
    return question, f"{value} {target}" if with_unit else value, _quantity_forms(value, target, name), wrong


def _percentages(rng: Random) -> Content:
    kind = pick(rng, ("of", "as_percent", "increase"))
    if kind == "of":
        percent, base = 5 * between(rng, 1, 19), 20 * between(rng, 1, 30)
        value = Fraction(percent * base, 100)
        text = _decimal(value)
        question = f"What is {percent}% of {base}?"
        wrong = [_decimal(Fraction(percent * base, 10)), str(base - percent), _decimal(value + 1)]
        return question, text, [text, f"{text}.0" if "." not in text else text + "0"], wrong
    if kind == "as_percent":
        hundredths = between(rng, 1, 199)
        share = _decimal(Fraction(hundredths, 100))
        question = f"What is {share} written as a percentage?"
        wrong = [f"{_decimal(Fraction(hundredths, 10))}%", f"{hundredths * 10}%", share]
    else:
        hundredths = 5 * between(rng, 1, 12)
        old = 20 * between(rng, 2, 25)
        new = old * (100 + hundredths) // 100
        question = f"A price rises from {old} to {new}. By what percentage did it increase?"
        wrong = [f"{new - old}%", f"{_rounded(Fraction(100 * (new - old), new), 2)}%", f"{100 + hundredths}%"]
    text = str(hundredths)
    right = [f"{text}%", f"{text} %", f"{text}\\%", text, f"{text} percent", f"{text}.0%"]
    return question, f"{text}%", right, wrong


def _capitals(rng: Random) -> Content:
    index = int(rng.random() * len(_CAPITALS))
    country, capital, confusion = _CAPITALS[index]
    other = _CAPITALS[(index + between(rng, 1, len(_CAPITALS) - 1)) % len(_CAPITALS)][1]
    question = pick(rng, (f"What is the capital of {country}?", f"Which city is the capital of {country}?"))
    right = [capital, capital.lower(), capital.upper(), f"\\text{{{capital}}}", f"{capital}."]
    if " " in capital:
        right.append(capital.replace(" ", "-").lower())
    plain = capital.translate(str.maketrans("áíóé", "aioe"))
    if plain != capital:
        right.append(plain)  # the unaccented spelling: a text judge that keeps accents calls it different
    right += [f"{capital}, {country.removeprefix('the ')}", f"the city of {capital}"]
    return question, capital, right, [confusion, confusion, other]


def _chemistry(rng: Random) -> Content:
    index = int(rng.random() * len(_ELEMENTS))
    name, symbol, number = _ELEMENTS[index]
    other = _ELEMENTS[(index + between(rng, 1, len(_ELEMENTS) - 1)) % len(_ELEMENTS)]
    if rng.random() < 0.6:
        question = f"What is the chemical symbol for {name}?"
        guess = name[:2].title()
        wrong = [guess if guess != symbol else name[0].upper() + name[2], other[1]]
        right = [symbol, f"\\mathrm{{{symbol}}}", f"\\text{{{symbol}}}", symbol.lower(), f"{symbol} ({name})"]
        return question, symbol, right, wrong
    question = f"What is the atomic number of {name}?"
    return question, str(number), [str(number), f"Z = {number}"], [str(number + 1), str(other[2])]


def _history(rng: Random) -> Content:
    event, year = pick(rng, _EVENTS)
    question = f"In what year {event}?"
    right = [str(year), f"{year} AD", f"in {year}", f"'{str(year)[2:]}"]
    return question, str(year), right, [str(year + 1), str(year - 1), str(year + 10)]


def _long_date(day: date) -> str:
    return f"{day.day} {_MONTHS[day.month - 1]} {day.year}"


def _calendar(rng: Random) -> Content:
    kind = pick(rng, ("after", "weekday", "between"))
    start = date(2000, 1, 1) + timedelta(days=between(rng, 0, 30 * 365))
    if kind == "after":
        offset = between(rng, 10, 200)
        end = start + timedelta(days=offset)
        question = f"What date is {offset} days after {_long_date(start)}?"
        expected = _long_date(end)
        right = [
            expected,
            expected.lower(),
            f"{_MONTHS[end.month - 1]} {end.day}, {end.year}",
            end.isoformat(),
            f"{end.day:02d}/{end.month:02d}/{end.year}",
        ]
        slips = (end + timedelta(days=1), end - timedelta(days=1), end + timedelta(days=30))
        return question, expected, right, [_long_date(d) for d in slips]
    if kind == "weekday":
        day = date(1950, 1, 1) + timedelta(days=between(rng, 0, 80 * 365))
        name = _WEEKDAYS[day.weekday()]
        question = f"What day of the week was {_long_date(day)}?"
        right = [name, name.lower(), name.upper(), f"{name}.", name[:3]]
        wrong = [_WEEKDAYS[(day.weekday() + 1) % 7], _WEEKDAYS[(day.weekday() - 1) % 7]]
        return question, name, right, wrong
    end = start + timedelta(days=between(rng, 5, 90))
    days = (end - start).days
    question = f"How many days are there from {_long_date(start)} to {_long_date(end)}?"
    expected = f"{days} days" if rng.random() < 0.5 else str(days)
    # Counting both ends is the classic slip.
    return question, expected, [str(days), f"{days} days", f"{days} d"], [str(days + 1), f"{days - 1} days"]


# (topic, weight, generator)
_TOPICS: Final[tuple[tuple[str, int, Callable[[Random], Content]], ...]] = (
    ("arithmetic", 20, _arithmetic),
    ("fractions", 12, _fractions),
    ("units", 18, _units),
    ("percentages", 8, _percentages),
    ("capitals", 16, _capitals),
    ("chemistry", 6, _chemistry),
    ("history", 8, _history),
    ("calendar", 12, _calendar),
)
_TOPIC_NAMES: Final = tuple(name for name, _, _ in _TOPICS)
_TOPIC_CUM_WEIGHTS: Final = tuple(sum(w for _, w, _ in _TOPICS[: i + 1]) for i in range(len(_TOPICS)))
_GENERATORS: Final = {name: generate for name, _, generate in _TOPICS}


def _make_task(seed: int, index: int) -> _Task:
    rng = Random(derived_seed(seed, "qa-task", index))
    topic = rng.choices(_TOPIC_NAMES, cum_weights=_TOPIC_CUM_WEIGHTS)[0]
    question, expected, right, wrong = _GENERATORS[topic](rng)
    # dict.fromkeys, not set: keeps first-seen order, which (unlike a str set's order) is the same in every process.
    right_forms = tuple(dict.fromkeys([expected, *right]))
    wrong_forms = tuple(w for w in dict.fromkeys(wrong) if w not in right_forms) or (f"not {expected}",)
    before, after = pick(rng, _PROMPTS)
    # Skewed towards easy, with a tail of tasks the model almost never gets right.
    skill = min(0.97, rng.random() ** 0.4)
    return _Task(
        index=index,
        uuid=str(uuid.UUID(int=rng.getrandbits(128), version=4)),
        topic=topic,
        question=question,
        prompt=before + question + after,
        expected_answer=expected,
        right=right_forms,
        wrong=wrong_forms,
        skill=skill,
    )


# --- per-rollout content ------------------------------------------------------------------------------------


def _prose(rng: Random, task: _Task, sentences: int) -> str:
    pool = _GENERIC_PROSE + _TOPIC_PROSE[task.topic]
    # Without replacement: a model rarely repeats a sentence word for word.
    return " ".join(distinct(rng, pool, min(sentences, len(pool))))


def _render(rng: Random, task: _Task, fmt: str, answer: str, correct: bool) -> str:
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


def _make_response(seed: int, task: _Task, rollout: int, dispatch_index: int) -> Row:
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

    input_tokens = approx_tokens(task.prompt) + CHAT_TEMPLATE_TOKENS
    # +1: the end-of-turn token is generated even when the visible text is empty.
    output_tokens = approx_tokens(text) + reasoning_tokens + 1
    # Dispatch is task-major at a steady rate; each response starts a little after its dispatch.
    created_at = round(EPOCH + dispatch_index * 0.02 + rng.uniform(0.0, 30.0), 1)
    return response_object(
        f"resp_{hex_id}",
        created_at,
        output,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        reasoning_tokens=reasoning_tokens,
    )


def _judge(task: _Task, response: Row) -> tuple[float, str | None, list[Row]]:
    """(reward, extracted_answer, judge_evaluations) as the equivalence_judge server gives them by default.

    The same steps as EquivalenceJudgeServer._grade with the default config and no regex: the candidate is the
    last assistant message (or the extraction-failure text), the judge's reply is the local judge model's
    rule, and the reward is what parse_verdict reads from that reply.
    """
    extracted = last_assistant_text(response) or None
    generated = extracted if extracted is not None else _JUDGE.msg_extraction_failure
    prompt = fill_prompt(
        _JUDGE.prompt_template, question=task.question, expected_answer=task.expected_answer, generated_answer=generated
    )
    request = {
        "model": _JUDGE.judge_model,
        "messages": judge_messages(_JUDGE.judge_system_message, prompt),
        **_JUDGE.sampling_params(),
    }
    reply = verdict_reply(prompt)
    verdict = parse_verdict(reply, equal_label=_JUDGE.judge_equal_label, not_equal_label=_JUDGE.judge_not_equal_label)
    evaluation: Row = {"responses_create_params": request, "response": reply, "verdict_label": verdict.label}
    if verdict.issues:
        evaluation["judgement_parsing_issues"] = list(verdict.issues)
    return (1.0 if verdict.equal else 0.0), extracted, [evaluation]


def _rollout_row(spec: SyntheticSpec, task: _Task, rollout: int) -> Row:
    response = _make_response(spec.seed, task, rollout, task.index * spec.rollouts_per_task + rollout)
    reward, extracted, evaluations = _judge(task, response)
    # The equivalence_judge server's /verify response, then the stamps collection adds.
    return {
        "responses_create_params": responses_create_params(task.prompt),
        "response": response,
        "reward": reward,
        "mask_sample": False,
        "failure_kind": None,
        "failure_reason": None,
        "expected_answer": task.expected_answer,
        "extracted_answer": extracted,
        "judge_evaluations": evaluations,
        "_ng_task_index": task.index,
        "_ng_rollout_index": rollout,
        "agent_ref": agent_ref(spec.agent_name),
        "_ng_environment_server": _ENVIRONMENT_SERVER,
        "_ng_result_type": RESULT_TYPE,
    }


# --- rows and files -----------------------------------------------------------------------------------------


def iter_input_rows(spec: SyntheticSpec) -> Iterator[Row]:
    """`rollouts_materialized_inputs.jsonl` rows in dispatch order: t0r0, t0r1, ..., t1r0, ..."""
    ref = agent_ref(spec.agent_name)
    for t in range(spec.tasks):
        task = _make_task(spec.seed, t)
        base: Row = {
            "responses_create_params": {"input": [{"role": "user", "content": task.prompt}]},
            "question": task.question,
            "expected_answer": task.expected_answer,
            "uuid": task.uuid,
            "agent_ref": ref,
        }
        for r in range(spec.rollouts_per_task):
            yield {**base, "_ng_task_index": t, "_ng_rollout_index": r}


def iter_rollout_rows(spec: SyntheticSpec) -> Iterator[Row]:
    """`rollouts.jsonl` rows in a seeded completion order (every key exactly once)."""
    k = spec.rollouts_per_task
    for key in completion_order(spec.rows, spec.seed):
        t, r = divmod(key, k)
        # Rebuilt per rollout (cheap, deterministic) rather than cached: in a shuffled order a cache of
        # tasks would have to hold nearly all of them.
        yield _rollout_row(spec, _make_task(spec.seed, t), r)


def write_qa_dataset(out_dir: Path, spec: SyntheticSpec) -> tuple[Path, Path]:
    """Write both files of a synthetic QA run into `out_dir`; return (inputs_path, rollouts_path)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    inputs_path = out_dir / INPUTS_FILE_NAME
    rollouts_path = out_dir / ROLLOUTS_FILE_NAME
    write_jsonl_atomically(inputs_path, iter_input_rows(spec))
    write_jsonl_atomically(rollouts_path, iter_rollout_rows(spec))
    return inputs_path, rollouts_path


# --- command line -------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m reverify_assets.synthetic.qa_rollouts",
        description=f"Write a synthetic NeMo Gym free-form QA run: {INPUTS_FILE_NAME} and {ROLLOUTS_FILE_NAME}.",
    )
    parser.add_argument("--tasks", type=positive_int, required=True, help="distinct questions")
    parser.add_argument("--rollouts-per-task", type=positive_int, default=4, help="rollouts per question")
    parser.add_argument("--seed", type=int, default=0, help="same seed, byte-identical files")
    parser.add_argument("--agent-name", default=DEFAULT_AGENT_NAME, help="agent_ref.name of every row")
    parser.add_argument("--out", type=Path, required=True, help="output directory (created if missing)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    spec = QASpec(
        tasks=args.tasks, rollouts_per_task=args.rollouts_per_task, seed=args.seed, agent_name=args.agent_name
    )
    started = time.perf_counter()
    try:
        inputs_path, rollouts_path = write_qa_dataset(args.out, spec)
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    elapsed = time.perf_counter() - started
    for path in (inputs_path, rollouts_path):
        print(f"wrote {path}: {spec.rows} rows, {path.stat().st_size} bytes")
    print(f"{spec.rows} rollouts of {spec.tasks} tasks in {elapsed:.2f} s ({spec.rows / elapsed:.0f} rows/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
