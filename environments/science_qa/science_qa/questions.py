"""The question generators: physics and chemistry calculations with exact answers, and
multiple-choice questions over small fact tables (chemistry, physics units, biology, astronomy).

Every numeric answer is exact (``Fraction`` arithmetic, parameters chosen so answers terminate as
decimals), so the grader never needs a tolerance: math-verify compares the reply's number with
the answer exactly, and ``12.50`` or ``25/2`` count as ``12.5``.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

# Standard atomic weights rounded as school tables give them.
ATOMIC_MASS = {"H": 1, "C": 12, "N": 14, "O": 16, "Na": 23, "Mg": 24, "S": 32, "Cl": 35.5, "K": 39, "Ca": 40}
COMPOUNDS = {
    "water (H2O)": {"H": 2, "O": 1},
    "carbon dioxide (CO2)": {"C": 1, "O": 2},
    "methane (CH4)": {"C": 1, "H": 4},
    "ammonia (NH3)": {"N": 1, "H": 3},
    "glucose (C6H12O6)": {"C": 6, "H": 12, "O": 6},
    "sodium chloride (NaCl)": {"Na": 1, "Cl": 1},
    "sulfuric acid (H2SO4)": {"H": 2, "S": 1, "O": 4},
    "calcium carbonate (CaCO3)": {"Ca": 1, "C": 1, "O": 3},
    "magnesium oxide (MgO)": {"Mg": 1, "O": 1},
    "potassium chloride (KCl)": {"K": 1, "Cl": 1},
    "ethanol (C2H5OH)": {"C": 2, "H": 6, "O": 1},
}

ELEMENTS = {
    "H": "hydrogen", "He": "helium", "Li": "lithium", "Be": "beryllium", "B": "boron",
    "C": "carbon", "N": "nitrogen", "O": "oxygen", "F": "fluorine", "Ne": "neon",
    "Na": "sodium", "Mg": "magnesium", "Al": "aluminium", "Si": "silicon", "P": "phosphorus",
    "S": "sulfur", "Cl": "chlorine", "Ar": "argon", "K": "potassium", "Ca": "calcium",
    "Fe": "iron", "Cu": "copper", "Zn": "zinc", "Ag": "silver", "Sn": "tin", "I": "iodine",
    "W": "tungsten", "Au": "gold", "Hg": "mercury", "Pb": "lead",
}
NOBLE_GASES = ["helium", "neon", "argon", "krypton", "xenon"]
NOT_NOBLE = ["oxygen", "nitrogen", "chlorine", "hydrogen", "fluorine", "sodium", "carbon", "sulfur"]

SI_UNITS = {
    "force": "newton", "energy": "joule", "power": "watt", "pressure": "pascal",
    "electric charge": "coulomb", "electrical resistance": "ohm", "frequency": "hertz",
    "electric potential difference": "volt", "electric current": "ampere",
    "thermodynamic temperature": "kelvin", "amount of substance": "mole",
    "magnetic flux density": "tesla", "capacitance": "farad", "inductance": "henry",
}
ORGANELLES = {
    "mitochondrion": "releasing energy from food by aerobic respiration",
    "ribosome": "building proteins from amino acids",
    "chloroplast": "photosynthesis",
    "nucleus": "holding the cell's chromosomes",
    "lysosome": "digesting worn-out parts and waste with enzymes",
    "Golgi apparatus": "modifying and packaging proteins for export",
    "cell membrane": "controlling what enters and leaves the cell",
    "cell wall": "giving a plant cell a rigid shape",
}
PLANETS = ["Mercury", "Venus", "Earth", "Mars", "Jupiter", "Saturn", "Uranus", "Neptune"]
ORDINALS = ["first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth"]


def decimal(value: Fraction) -> str:
    """An exact terminating decimal, without trailing zeros (``Fraction(25, 2)`` -> ``12.5``)."""
    if value.denominator == 1:
        return str(value.numerator)
    for places in range(1, 8):
        scaled = value * 10**places
        if scaled.denominator == 1:
            text = f"{scaled.numerator / 10**places:.{places}f}"
            return text.rstrip("0").rstrip(".")
    raise ValueError(f"{value} does not terminate; pick parameters that make it terminate")


@dataclass(frozen=True)
class Numeric:
    topic: str
    text: str  # format fields are the sampled parameters
    sample: Callable[[random.Random], dict[str, Any]]
    solve: Callable[..., Fraction]


def _molar(formula: dict[str, int]) -> Fraction:
    return sum((Fraction(str(ATOMIC_MASS[el])) * n for el, n in formula.items()), Fraction(0))


def _masses(formula: dict[str, int]) -> str:
    return ", ".join(f"{el} = {ATOMIC_MASS[el]}" for el in formula)


def _compound(r: random.Random) -> dict[str, Any]:
    name = r.choice(sorted(COMPOUNDS))
    return {"name": name, "masses": _masses(COMPOUNDS[name]), "formula": COMPOUNDS[name]}


NUMERIC = [
    Numeric(
        "kinematics",
        "A cart starts from rest and accelerates uniformly at {a} m/s^2 for {t} s. What is its final speed in m/s?",
        lambda r: {"a": r.randint(2, 12), "t": r.randint(2, 15)},
        lambda a, t: Fraction(a * t),
    ),
    Numeric(
        "kinematics",
        "A cyclist covers {d} m in {t} s at constant speed. What is the speed in m/s?",
        lambda r: {"t": (t := r.choice([4, 5, 8, 10, 20, 25])), "d": t * r.randint(2, 15) + r.choice([0, t // 2])},
        lambda d, t: Fraction(d, t),
    ),
    Numeric(
        "electricity",
        "A current of {i} A flows through a {ohms} ohm resistor. What is the voltage across it in volts?",
        lambda r: {"i": r.choice([0.5, 1.5, 2, 2.5, 3, 4]), "ohms": r.randint(2, 60)},
        lambda i, ohms: Fraction(str(i)) * ohms,
    ),
    Numeric(
        "electricity",
        "A {v} V supply drives a current of {i} A through a heater. What is the heater's power in watts?",
        lambda r: {"v": r.choice([6, 12, 24, 120, 230]), "i": r.choice([0.5, 2, 3, 4, 5, 10])},
        lambda v, i: Fraction(str(i)) * v,
    ),
    Numeric(
        "mechanics",
        "A {m} kg ball moves at {v} m/s. What is its kinetic energy in joules?",
        lambda r: {"m": r.choice([1, 2, 4, 6, 0.5]), "v": r.randint(2, 20)},
        lambda m, v: Fraction(str(m)) * v * v / 2,
    ),
    Numeric(
        "mechanics",
        "A {m} kg box is lifted {h} m. Taking g = 10 m/s^2, how much gravitational potential energy does it gain, in joules?",
        lambda r: {"m": r.randint(2, 50), "h": r.choice([0.5, 1, 1.5, 2, 3, 5])},
        lambda m, h: Fraction(str(h)) * m * 10,
    ),
    Numeric(
        "mechanics",
        "A force of {f} N acts on an area of {a} m^2. What is the pressure in pascals?",
        lambda r: {"a": r.choice([0.2, 0.5, 2, 4, 5]), "f": r.randint(1, 40) * 10},
        lambda f, a: Fraction(f) / Fraction(str(a)),
    ),
    Numeric(
        "waves",
        "A wave has frequency {f} Hz and wavelength {lam} m. What is its speed in m/s?",
        lambda r: {"f": r.choice([2, 5, 50, 100, 440]), "lam": r.choice([0.5, 0.75, 1.5, 2, 3.4])},
        lambda f, lam: Fraction(str(lam)) * f,
    ),
    Numeric(
        "density",
        "A block of mass {m} g has a volume of {v} cm^3. What is its density in g/cm^3?",
        lambda r: {"v": (v := r.choice([2, 4, 5, 8, 10, 20])), "m": v * r.randint(1, 11) + r.choice([0, v // 2])},
        lambda m, v: Fraction(m, v),
    ),
    Numeric(
        "heat",
        "How much energy in joules heats {m} kg of water by {dt} degrees C? Take the specific heat capacity of water as 4200 J/(kg C).",
        lambda r: {"m": r.choice([0.1, 0.2, 0.5, 1, 2]), "dt": r.randint(2, 60)},
        lambda m, dt: Fraction(str(m)) * 4200 * dt,
    ),
    Numeric(
        "chemistry",
        "Using the atomic masses {masses}, what is the molar mass of {name} in g/mol?",
        _compound,
        lambda name, masses, formula: _molar(formula),
    ),
    Numeric(
        "chemistry",
        "Using the atomic masses {masses}, how many moles are in {grams} g of {name}?",
        lambda r: {**(c := _compound(r)), "grams": decimal(_molar(c["formula"]) * Fraction(r.choice([1, 2, 3, 4, 5, 10]), r.choice([1, 2, 4])))},
        lambda name, masses, formula, grams: Fraction(grams) / _molar(formula),
    ),
]


def numeric_question(r: random.Random) -> tuple[str, str, str]:
    """(topic, question, exact answer)."""
    template = r.choice(NUMERIC)
    params = template.sample(r)
    shown = {k: v for k, v in params.items() if k != "formula"}
    return template.topic, template.text.format(**shown), decimal(template.solve(**params))


def _choices(r: random.Random, right: str, pool: list[str]) -> tuple[list[str], str]:
    options = [*r.sample([p for p in pool if p != right], 3), right]
    r.shuffle(options)
    return options, "ABCD"[options.index(right)]


def choice_question(r: random.Random) -> tuple[str, str, list[str], str]:
    """(topic, question, four options, letter of the right one)."""
    kind = r.randrange(6)
    if kind == 0:
        symbol = r.choice(sorted(ELEMENTS))
        options, letter = _choices(r, ELEMENTS[symbol], sorted(ELEMENTS.values()))
        return "chemistry", f"Which element has the chemical symbol {symbol}?", options, letter
    if kind == 1:
        gas = r.choice(NOBLE_GASES)
        options = [*r.sample(NOT_NOBLE, 3), gas]
        r.shuffle(options)
        return "chemistry", "Which of these is a noble gas?", options, "ABCD"[options.index(gas)]
    if kind == 2:
        quantity = r.choice(sorted(SI_UNITS))
        options, letter = _choices(r, SI_UNITS[quantity], sorted(SI_UNITS.values()))
        return "physics", f"What is the SI unit of {quantity}?", options, letter
    if kind == 3:
        organelle = r.choice(sorted(ORGANELLES))
        options, letter = _choices(r, ORGANELLES[organelle], sorted(ORGANELLES.values()))
        return "biology", f"What is the main job of the {organelle}?", options, letter
    if kind == 4:
        n = r.randrange(8)
        options, letter = _choices(r, PLANETS[n], PLANETS)
        return "astronomy", f"Which planet is the {ORDINALS[n]} from the Sun?", options, letter
    topic, question, answer = numeric_question(r)  # a calculation, answered by choosing
    value = Fraction(answer)
    wrong = {decimal(value * 2), decimal(value / 2), decimal(value * 10), decimal(value + 1)}
    wrong.discard(answer)
    options = [*r.sample(sorted(wrong), 3), answer]
    r.shuffle(options)
    return topic, question, options, "ABCD"[options.index(answer)]
