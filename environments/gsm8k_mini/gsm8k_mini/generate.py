"""Regenerate the shipped word problems: ``python -m gsm8k_mini.generate``.

Problems follow GSM8K's style (short stories, one integer answer, worked solution ending in
``#### N``) from templates with randomized names, items and numbers; the files are committed so
the environment never needs a download and every install sees the same data.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

NAMES = [
    "Ava",
    "Ben",
    "Chloe",
    "Diego",
    "Emma",
    "Farah",
    "Gus",
    "Hana",
    "Ivan",
    "Jade",
    "Kofi",
    "Lena",
    "Mateo",
    "Nora",
    "Omar",
    "Priya",
]
ITEMS = [
    "apples",
    "stickers",
    "marbles",
    "cookies",
    "pencils",
    "cards",
    "books",
    "shells",
    "stamps",
    "balloons",
]


def _problem(rng: random.Random) -> dict[str, str]:
    name, item = rng.choice(NAMES), rng.choice(ITEMS)
    kind = rng.randrange(7)
    if kind == 0:
        a, b = rng.randint(10, 60), rng.randint(5, 40)
        c = rng.randint(1, a + b - 1)
        q = f"{name} has {a} {item}. {name} buys {b} more and then gives {c} to a friend. How many {item} does {name} have now?"
        ans, work = a + b - c, f"{a} + {b} = {a + b}. {a + b} - {c} = {a + b - c}."
    elif kind == 1:
        a, b = rng.randint(3, 24), rng.randint(2, 15)
        q = f"A box holds {a} {item}. How many {item} are in {b} boxes?"
        ans, work = a * b, f"{a} x {b} = {a * b}."
    elif kind == 2:
        a, b = rng.randint(5, 40), rng.randint(2, 20)
        q = f"{name} reads {a} pages every day. How many days does it take {name} to read a {a * b}-page book?"
        ans, work = b, f"{a * b} / {a} = {b}."
    elif kind == 3:
        a, b = rng.randint(2, 15), rng.randint(2, 8)
        c = a * b + rng.randint(1, 30)
        q = f"Tickets cost ${a} each. {name} buys {b} tickets and pays with ${c}. How much change does {name} get?"
        ans, work = c - a * b, f"{a} x {b} = {a * b}. {c} - {a * b} = {c - a * b}."
    elif kind == 4:
        a, b, c = rng.randint(8, 25), rng.randint(2, 8), rng.randint(2, 6)
        q = f"{name} earns ${a} per hour and works {b} hours a day for {c} days. How many dollars does {name} earn?"
        ans, work = a * b * c, f"{a} x {b} = {a * b} per day. {a * b} x {c} = {a * b * c}."
    elif kind == 5:
        p = rng.choice([10, 20, 25, 50])
        a = rng.randint(2, 20) * (100 // p)
        q = f"A jacket costs ${a}. It is on sale for {p}% off. What is the sale price in dollars?"
        off = a * p // 100
        ans, work = a - off, f"{p}% of {a} is {off}. {a} - {off} = {a - off}."
    else:
        a, b = rng.randint(2, 9), rng.randint(2, 9)
        total = (a + b) * rng.randint(2, 6)
        q = f"{name} shares {total} {item} between two friends in the ratio {a}:{b}. How many {item} does the first friend get?"
        part = total // (a + b)
        ans, work = (
            a * part,
            f"{a} + {b} = {a + b} parts. {total} / {a + b} = {part}. {a} x {part} = {a * part}.",
        )
    return {"question": q, "answer": str(ans), "solution": f"{work}\n#### {ans}"}


def generate(n: int, seed: int) -> list[dict[str, str]]:
    rng = random.Random(seed)
    return [_problem(rng) for _ in range(n)]


def main() -> None:
    out = Path(__file__).parent / "data"
    out.mkdir(exist_ok=True)
    for split, n, seed in (("train", 300, 1), ("test", 100, 2)):
        with (out / f"{split}.jsonl").open("w") as f:
            for row in generate(n, seed):
                f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
