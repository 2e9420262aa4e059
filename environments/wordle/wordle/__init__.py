"""wordle: guess a five-letter word in six tries, with feedback after every guess.

Feedback marks each letter G (right letter, right place), Y (in the word elsewhere) or X (not in
the word), with Wordle's handling of repeated letters. Rewards: solving (1.0), partial credit for
the best guess's greens and yellows (0.2), solving in fewer turns (0.2), and format (0.2).
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import verifiers as vf

WORDS = (Path(__file__).parent / "words.txt").read_text().split()

SYSTEM_PROMPT = """You are playing Wordle. Guess the secret five-letter English word in at most six tries.
After each guess you get feedback for every letter: G = right letter in the right place,
Y = the letter is in the word but elsewhere, X = the letter is not in the word.
Think briefly, then give exactly one guess like this:
<guess>crane</guess>"""


def feedback(guess: str, secret: str) -> str:
    """Wordle marks: greens first, then yellows limited by the secret's remaining letter counts."""
    marks = ["X"] * 5
    remaining = Counter(s for g, s in zip(guess, secret, strict=True) if g != s)
    for i, (g, s) in enumerate(zip(guess, secret, strict=True)):
        if g == s:
            marks[i] = "G"
        elif remaining[g] > 0:
            marks[i] = "Y"
            remaining[g] -= 1
    return "".join(marks)


class WordleEnv(vf.MultiTurnEnv):
    def __init__(self, parser: vf.XMLParser, **kwargs):
        super().__init__(parser=parser, **kwargs)

    async def setup_state(self, state: vf.State, **kwargs) -> vf.State:
        state["guesses"], state["marks"], state["solved"] = [], [], False
        return state

    @vf.stop
    async def solved(self, state: vf.State) -> bool:
        return state["solved"]

    async def env_response(self, messages: vf.Messages, state: vf.State, **kwargs) -> vf.Messages:
        guess = (self.parser.parse_answer(messages) or "").strip().lower()
        left = self.max_turns - state["turn"]
        if len(guess) != 5 or not guess.isalpha():
            return [
                {
                    "role": "user",
                    "content": f"Invalid guess {guess!r}: give one five-letter word in <guess></guess> tags. {left} tries left.",
                }
            ]
        marks = feedback(guess, state["answer"])
        state["guesses"].append(guess)
        state["marks"].append(marks)
        if marks == "GGGGG":
            state["solved"] = True
            return [{"role": "user", "content": f"{guess.upper()} -> {marks}. Solved!"}]
        return [
            {"role": "user", "content": f"{guess.upper()} -> {' '.join(marks)}. {left} tries left."}
        ]


def load_environment(
    num_train_examples: int = 1000, num_eval_examples: int = 50, max_turns: int = 6, seed: int = 0
) -> vf.Environment:
    parser = vf.XMLParser(["think", "guess"], answer_field="guess")

    def rows(n: int, seed_: int) -> list[dict]:
        rng = random.Random(seed_)
        return [
            {"question": "Start the game: make your first guess.", "answer": rng.choice(WORDS)}
            for _ in range(n)
        ]

    def correct_answer(state, **kwargs) -> float:
        return 1.0 if state.get("solved") else 0.0

    def partial_credit(state, **kwargs) -> float:
        """Best guess: 0.2 per green, 0.1 per yellow."""
        return max(
            (0.2 * m.count("G") + 0.1 * m.count("Y") for m in state.get("marks") or []), default=0.0
        )

    def efficiency(state, **kwargs) -> float:
        if not state.get("solved"):
            return 0.0
        return (max_turns - len(state["guesses"]) + 1) / max_turns

    format_reward = parser.get_format_reward_func()
    format_reward.__name__ = "format_reward"
    rubric = vf.Rubric(
        funcs=[correct_answer, partial_credit, efficiency, format_reward],
        weights=[1.0, 0.2, 0.2, 0.2],
        parser=parser,
    )
    return WordleEnv(
        dataset=rows(num_train_examples, seed),
        eval_dataset=rows(num_eval_examples, seed + 1),
        system_prompt=SYSTEM_PROMPT,
        parser=parser,
        rubric=rubric,
        max_turns=max_turns,
    )
