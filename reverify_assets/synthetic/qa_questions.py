"""The question kinds of the synthetic QA run and the task each (seed, task index) pair stands for.

One maker per kind (arithmetic, fractions, units, percentages, capitals, chemistry, history, calendar) returns the
question, its canonical answer, other ways to write that answer right and plausible mistakes; `make_task` picks a
kind by weight and wraps the result in a `QATask`. How a rollout then phrases an answer lives in ``qa_answers``.

Every call takes the RNG draws in a fixed order: adding, removing or reordering a draw (or a kind in `_TOPICS`)
changes every generated file, and the bundled sample in samples/judge/ with it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, timedelta
from fractions import Fraction
from math import gcd
from random import Random
from typing import Final

from reverify_assets.synthetic.nemo_gym_rows import between, derived_seed, pick
from reverify_assets.synthetic.qa_numbers import (
    decimal_text,
    fraction_text,
    integer_forms,
    quantity_forms,
    rounded,
    terminates,
)
from reverify_assets.synthetic.qa_tables import (
    CAPITALS,
    CONVERSIONS,
    COUNTS,
    ELEMENTS,
    EVENTS,
    MONTHS,
    UNIT_NAMES,
    WEEKDAYS,
)

__all__ = ["Content", "QATask", "make_task"]

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


@dataclass(frozen=True, slots=True)
class QATask:
    """One question with everything its rollouts draw on: the prompt, the right and wrong answer forms."""

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
    return question, str(value), integer_forms(value), [str(s) for s in slips if s != value]


def _fractions(rng: Random) -> Content:
    kind = pick(rng, ("simplify", "add", "to_decimal", "to_fraction"))
    q = pick(rng, (2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 25))
    p = pick(rng, [n for n in range(1, q) if gcd(n, q) == 1])
    value = Fraction(p, q)
    wrong: list[Fraction | str] = [Fraction(q, p), Fraction(p + 1, q)]
    if kind == "simplify":
        k = between(rng, 2, 6)
        question, expected = f"Simplify {k * p}/{k * q} to lowest terms.", fraction_text(value)
        wrong.append(Fraction(p, q * k))
    elif kind == "add":
        # Two fractions whose sum is p/q: a classic slip adds numerators and denominators.
        m = between(rng, 2, 3)
        first = Fraction(between(rng, 1, p * m - 1), q * m)
        second = value - first
        question, expected = f"What is {fraction_text(first)} + {fraction_text(second)}?", fraction_text(value)
        wrong.append(Fraction(first.numerator + second.numerator, first.denominator + second.denominator))
    elif kind == "to_decimal" and terminates(value):
        question, expected = f"Write {p}/{q} as a decimal.", decimal_text(value)
        wrong.append(f"{p}.{q}")
    else:
        if not terminates(value):
            value, p, q = Fraction(3, 8), 3, 8
        question, expected = f"Write {decimal_text(value)} as a fraction in lowest terms.", fraction_text(value)
        wrong.append(Fraction(p * 10, q))
    right = [expected, fraction_text(value), f"\\frac{{{p}}}{{{q}}}", f"{p} / {q}", f"{2 * p}/{2 * q}"]
    if terminates(value):
        right += [decimal_text(value), decimal_text(value).replace("0.", ".", 1)]
    else:
        # Rounded decimals are "right" to a lenient grader and wrong to an exact one: the judge rule's call.
        right += [rounded(value, 3), rounded(value, 2)]
    wrong_texts = [w if isinstance(w, str) else fraction_text(w) for w in wrong]
    return question, expected, right, [w for w in wrong_texts if Fraction(w) != value]


def _units(rng: Random) -> Content:
    kind = pick(rng, ("convert", "convert", "convert", "temperature", "speed", "count"))
    with_unit = rng.random() < 0.7
    if kind == "temperature":
        celsius = 5 * between(rng, -8, 40)
        fahrenheit = celsius * 9 // 5 + 32
        if rng.random() < 0.5:
            question = f"Convert {fahrenheit} °F to degrees Celsius."
            value, symbol, name = celsius, "°C", "degrees Celsius"
            slips = [rounded(Fraction(fahrenheit * 5, 9), 1), str(fahrenheit - 32)]
        else:
            question = f"Convert {celsius} °C to degrees Fahrenheit."
            value, symbol, name = fahrenheit, "°F", "degrees Fahrenheit"
            slips = [rounded(Fraction(celsius * 9, 5), 1), str(celsius + 32)]
        text = str(value)
        right = [*quantity_forms(text, symbol, name), f"{text} ℃" if symbol == "°C" else f"{text}°", f"{text} C"]
        return question, f"{text} {symbol}" if with_unit else text, right, [f"{s} {symbol}" for s in slips]
    if kind == "speed":
        speed, hours = between(rng, 30, 120), Fraction(between(rng, 2, 12), 4)
        distance = speed * hours
        if not terminates(distance):
            hours, distance = Fraction(2), Fraction(speed * 2)
        question = (
            f"A train covers {decimal_text(distance)} km in {decimal_text(hours)} hours. What is its average speed?"
        )
        text = str(speed)
        right = [*quantity_forms(text, "km/h", "kilometres per hour"), f"{text} km/hr", f"{text} kph"]
        slips = [rounded(distance / (hours + 1), 1), decimal_text(distance * hours)]
        return question, f"{text} km/h" if with_unit else text, right, [f"{s} km/h" for s in slips]
    if kind == "count":
        big, small, factor = pick(rng, COUNTS)
        count = between(rng, 1, 9)
        value = count * factor
        plural = big if count == 1 else ("years of 365 days" if big.startswith("year") else big + "s")
        question = f"How many {small} are there in {'a' if count == 1 else count} {plural}?"
        right = [*integer_forms(value), f"{value:,}".replace(",", " "), f"{value} {small}"]
        return question, str(value), right, [str(value * 10), str(value // 10), str(factor * (count + 1))]
    _, source, target, name, factor = pick(rng, CONVERSIONS)
    amount = Fraction(between(rng, 1, 999), pick(rng, (1, 10, 100)))
    value = decimal_text(amount * factor)
    question = f"Convert {decimal_text(amount)} {source} to {name}."
    if rng.random() < 0.4:
        question = f"How many {name} are there in {decimal_text(amount)} {UNIT_NAMES[source]}?"
    wrong = [
        f"{decimal_text(amount * factor * 10)} {target}",
        f"{decimal_text(amount * factor / 10)} {target}",
        f"{value} {source}",
        f"{decimal_text(amount / factor) if terminates(amount / factor) else rounded(amount / factor, 2)} {target}",
    ]
    return question, f"{value} {target}" if with_unit else value, quantity_forms(value, target, name), wrong


def _percentages(rng: Random) -> Content:
    kind = pick(rng, ("of", "as_percent", "increase"))
    if kind == "of":
        percent, base = 5 * between(rng, 1, 19), 20 * between(rng, 1, 30)
        value = Fraction(percent * base, 100)
        text = decimal_text(value)
        question = f"What is {percent}% of {base}?"
        wrong = [decimal_text(Fraction(percent * base, 10)), str(base - percent), decimal_text(value + 1)]
        return question, text, [text, f"{text}.0" if "." not in text else text + "0"], wrong
    if kind == "as_percent":
        hundredths = between(rng, 1, 199)
        share = decimal_text(Fraction(hundredths, 100))
        question = f"What is {share} written as a percentage?"
        wrong = [f"{decimal_text(Fraction(hundredths, 10))}%", f"{hundredths * 10}%", share]
    else:
        hundredths = 5 * between(rng, 1, 12)
        old = 20 * between(rng, 2, 25)
        new = old * (100 + hundredths) // 100
        question = f"A price rises from {old} to {new}. By what percentage did it increase?"
        wrong = [f"{new - old}%", f"{rounded(Fraction(100 * (new - old), new), 2)}%", f"{100 + hundredths}%"]
    text = str(hundredths)
    right = [f"{text}%", f"{text} %", f"{text}\\%", text, f"{text} percent", f"{text}.0%"]
    return question, f"{text}%", right, wrong


def _capitals(rng: Random) -> Content:
    index = int(rng.random() * len(CAPITALS))
    country, capital, confusion = CAPITALS[index]
    other = CAPITALS[(index + between(rng, 1, len(CAPITALS) - 1)) % len(CAPITALS)][1]
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
    index = int(rng.random() * len(ELEMENTS))
    name, symbol, number = ELEMENTS[index]
    other = ELEMENTS[(index + between(rng, 1, len(ELEMENTS) - 1)) % len(ELEMENTS)]
    if rng.random() < 0.6:
        question = f"What is the chemical symbol for {name}?"
        guess = name[:2].title()
        wrong = [guess if guess != symbol else name[0].upper() + name[2], other[1]]
        right = [symbol, f"\\mathrm{{{symbol}}}", f"\\text{{{symbol}}}", symbol.lower(), f"{symbol} ({name})"]
        return question, symbol, right, wrong
    question = f"What is the atomic number of {name}?"
    return question, str(number), [str(number), f"Z = {number}"], [str(number + 1), str(other[2])]


def _history(rng: Random) -> Content:
    event, year = pick(rng, EVENTS)
    question = f"In what year {event}?"
    right = [str(year), f"{year} AD", f"in {year}", f"'{str(year)[2:]}"]
    return question, str(year), right, [str(year + 1), str(year - 1), str(year + 10)]


def _long_date(day: date) -> str:
    return f"{day.day} {MONTHS[day.month - 1]} {day.year}"


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
            f"{MONTHS[end.month - 1]} {end.day}, {end.year}",
            end.isoformat(),
            f"{end.day:02d}/{end.month:02d}/{end.year}",
        ]
        slips = (end + timedelta(days=1), end - timedelta(days=1), end + timedelta(days=30))
        return question, expected, right, [_long_date(d) for d in slips]
    if kind == "weekday":
        day = date(1950, 1, 1) + timedelta(days=between(rng, 0, 80 * 365))
        name = WEEKDAYS[day.weekday()]
        question = f"What day of the week was {_long_date(day)}?"
        right = [name, name.lower(), name.upper(), f"{name}.", name[:3]]
        wrong = [WEEKDAYS[(day.weekday() + 1) % 7], WEEKDAYS[(day.weekday() - 1) % 7]]
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


def make_task(seed: int, index: int) -> QATask:
    rng = Random(derived_seed(seed, "qa-task", index))
    topic = rng.choices(_TOPIC_NAMES, cum_weights=_TOPIC_CUM_WEIGHTS)[0]
    question, expected, right, wrong = _GENERATORS[topic](rng)
    # dict.fromkeys, not set: keeps first-seen order, which (unlike a str set's order) is the same in every process.
    right_forms = tuple(dict.fromkeys([expected, *right]))
    wrong_forms = tuple(w for w in dict.fromkeys(wrong) if w not in right_forms) or (f"not {expected}",)
    before, after = pick(rng, _PROMPTS)
    # Skewed towards easy, with a tail of tasks the model almost never gets right.
    skill = min(0.97, rng.random() ** 0.4)
    return QATask(
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
