"""The facts the synthetic QA questions ask about (``qa_questions``): capitals, elements, events, calendar names, units.

Plain data only, kept apart from the question makers so a table can grow without touching any logic. The order of
every table is part of the output: the generators index into them with a seeded RNG, so reordering or inserting
an entry changes the generated files.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Final

# (country, capital, the city most often given instead, usually the largest one)
CAPITALS: Final[tuple[tuple[str, str, str], ...]] = (
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
ELEMENTS: Final[tuple[tuple[str, str, int], ...]] = (
    ("hydrogen", "H", 1), ("helium", "He", 2), ("lithium", "Li", 3), ("carbon", "C", 6), ("nitrogen", "N", 7),
    ("oxygen", "O", 8), ("fluorine", "F", 9), ("neon", "Ne", 10), ("sodium", "Na", 11), ("magnesium", "Mg", 12),
    ("aluminium", "Al", 13), ("silicon", "Si", 14), ("phosphorus", "P", 15), ("sulfur", "S", 16),
    ("chlorine", "Cl", 17), ("potassium", "K", 19), ("calcium", "Ca", 20), ("iron", "Fe", 26),
    ("copper", "Cu", 29), ("zinc", "Zn", 30), ("silver", "Ag", 47), ("tin", "Sn", 50), ("iodine", "I", 53),
    ("tungsten", "W", 74), ("gold", "Au", 79), ("mercury", "Hg", 80), ("lead", "Pb", 82), ("uranium", "U", 92),
)  # fmt: skip

# (what happened, year)
EVENTS: Final[tuple[tuple[str, int], ...]] = (
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

MONTHS: Final = (
    "January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November",
    "December",
)  # fmt: skip
WEEKDAYS: Final = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")

# (quantity, from symbol, to symbol, to-unit spelled out, factor). Every factor is a terminating decimal, so
# every converted value has an exact decimal form.
CONVERSIONS: Final[tuple[tuple[str, str, str, str, Fraction], ...]] = (
    ("length", "m", "cm", "centimetres", Fraction(100)), ("length", "km", "m", "metres", Fraction(1000)),
    ("length", "cm", "mm", "millimetres", Fraction(10)), ("length", "in", "cm", "centimetres", Fraction(254, 100)),
    ("length", "ft", "in", "inches", Fraction(12)), ("mass", "kg", "g", "grams", Fraction(1000)),
    ("mass", "g", "mg", "milligrams", Fraction(1000)), ("volume", "L", "mL", "millilitres", Fraction(1000)),
    ("time", "h", "min", "minutes", Fraction(60)), ("time", "min", "s", "seconds", Fraction(60)),
)  # fmt: skip
UNIT_NAMES: Final = {
    "m": "metres", "km": "kilometres", "cm": "centimetres", "in": "inches", "ft": "feet", "kg": "kilograms",
    "g": "grams", "L": "litres", "h": "hours", "min": "minutes",
}  # fmt: skip
# (bigger unit, smaller unit, how many smaller in one bigger)
COUNTS: Final[tuple[tuple[str, str, int], ...]] = (
    ("day", "seconds", 86_400), ("week", "minutes", 10_080), ("week", "hours", 168), ("day", "minutes", 1_440),
    ("hour", "milliseconds", 3_600_000), ("year of 365 days", "hours", 8_760),
)  # fmt: skip
