"""tool-test: call the right typed tools with the right arguments, several at once.

Each question asks for 1-3 independent facts, each answerable by exactly one tool call; the
model should make all the calls (in parallel, in one turn) and then answer. Rewards: the
fraction of expected calls made with exactly the expected arguments, and a bonus metric for
making them all in a single turn.
"""

from __future__ import annotations

import json
import random
from typing import Literal

import verifiers as vf

CAPITALS = {
    "france": "Paris",
    "japan": "Tokyo",
    "kenya": "Nairobi",
    "peru": "Lima",
    "norway": "Oslo",
    "egypt": "Cairo",
}
RATES = {"USD": 1.0, "EUR": 0.9, "JPY": 150.0, "GBP": 0.8}


def get_capital(country: Literal["france", "japan", "kenya", "peru", "norway", "egypt"]) -> str:
    """Look up the capital city of a country.

    Args:
        country: The country, lowercase.
    """
    return CAPITALS[country]


def convert_currency(
    amount: float,
    from_currency: Literal["USD", "EUR", "JPY", "GBP"],
    to_currency: Literal["USD", "EUR", "JPY", "GBP"],
) -> float:
    """Convert an amount of money between currencies at fixed rates.

    Args:
        amount: How much money.
        from_currency: The currency of the amount.
        to_currency: The currency to convert to.
    """
    return round(amount / RATES[from_currency] * RATES[to_currency], 2)


def count_letter(word: str, letter: str) -> int:
    """Count how often a letter occurs in a word (case-insensitive).

    Args:
        word: The word to search.
        letter: A single letter.
    """
    if len(letter) != 1:
        raise ValueError("letter must be a single character")
    return word.lower().count(letter.lower())


WORDS = ["strawberry", "banana", "mississippi", "bookkeeper", "parallel", "committee"]


def _task(rng: random.Random) -> tuple[str, dict]:
    kind = rng.randrange(3)
    if kind == 0:
        country = rng.choice(list(CAPITALS))
        return f"the capital of {country}", {
            "name": "get_capital",
            "arguments": {"country": country},
        }
    if kind == 1:
        amount = rng.choice([10, 25, 99.5, 1000])
        src, dst = rng.sample(list(RATES), 2)
        return f"{amount} {src} in {dst}", {
            "name": "convert_currency",
            "arguments": {"amount": amount, "from_currency": src, "to_currency": dst},
        }
    word = rng.choice(WORDS)
    letter = rng.choice(sorted(set(word)))
    return f"how many times '{letter}' occurs in '{word}'", {
        "name": "count_letter",
        "arguments": {"word": word, "letter": letter},
    }


def make_rows(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        tasks = [_task(rng) for _ in range(rng.randint(1, 3))]
        question = (
            "Use the tools to find: "
            + "; ".join(t for t, _ in tasks)
            + ". Then summarize the results."
        )
        rows.append(
            {
                "question": question,
                "answer": "",
                "info": {"expected_calls": json.dumps([c for _, c in tasks])},
            }
        )
    return rows


def _calls(completion) -> list[list[dict]]:
    """Tool calls per assistant turn, with parsed arguments."""
    turns = []
    for message in completion:
        if message.get("role") == "assistant" and message.get("tool_calls"):
            turn = []
            for call in message["tool_calls"]:
                try:
                    args = json.loads(call["function"]["arguments"] or "{}")
                except (json.JSONDecodeError, TypeError):
                    args = None
                turn.append({"name": call["function"]["name"], "arguments": args})
            turns.append(turn)
    return turns


def load_environment(
    num_train_examples: int = 500, num_eval_examples: int = 50, seed: int = 0, max_turns: int = 4
) -> vf.Environment:
    def correct_calls(completion, info, **kwargs) -> float:
        """Fraction of the expected calls that were made with exactly the expected arguments."""
        expected = json.loads(info["expected_calls"])
        made = [c for turn in _calls(completion) for c in turn]
        return sum(1 for call in expected if call in made) / len(expected)

    def parallel_calls(completion, info, **kwargs) -> float:
        """1.0 when every expected call was made in the first tool-calling turn."""
        expected = json.loads(info["expected_calls"])
        turns = _calls(completion)
        return float(bool(turns) and all(call in turns[0] for call in expected))

    tools = [get_capital, convert_currency, count_letter]
    rubric = vf.RubricGroup(
        [
            vf.Rubric(funcs=[correct_calls, parallel_calls], weights=[1.0, 0.2]),
            vf.ToolRubric(tools=tools),
        ]
    )
    return vf.ToolEnv(
        tools=tools,
        dataset=make_rows(num_train_examples, seed),
        eval_dataset=make_rows(num_eval_examples, seed + 1),
        system_prompt="Answer using the tools. Make independent tool calls in parallel, in one turn.",
        rubric=rubric,
        max_turns=max_turns,
    )
