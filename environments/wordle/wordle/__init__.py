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


def replay(
    parser: vf.XMLParser, completion: vf.Messages, secret: str
) -> tuple[list[str], list[str]]:
    """Every valid guess in the completion and its marks, up to and including a solve.

    Rewards come from this replay, not from what ``env_response`` saw, so the model's last reply
    (at ``max_turns`` the environment never answers it) counts like every other.
    """
    guesses, marks = [], []
    for message in parser.get_assistant_messages(completion):
        guess = getattr(parser.parse(str(message.get("content") or "")), "guess", None) or ""
        guess = guess.strip().lower()
        if len(guess) != 5 or not guess.isalpha():
            continue
        guesses.append(guess)
        marks.append(feedback(guess, secret))
        if marks[-1] == "GGGGG":
            break
    return guesses, marks


class WordleEnv(vf.MultiTurnEnv):
    def __init__(self, parser: vf.XMLParser, **kwargs):
        super().__init__(parser=parser, **kwargs)

    async def setup_state(self, state: vf.State, **kwargs) -> vf.State:
        state["guesses"], state["marks"], state["solved"] = [], [], False
        return state

    @vf.stop(priority=10)
    async def solved(self, state: vf.State) -> bool:
        return state["solved"]

    @vf.cleanup
    async def record_game(self, state: vf.State) -> None:
        """The game as the completion shows it, including a final reply nobody answered."""
        state["guesses"], state["marks"] = replay(self.parser, state["completion"], state["answer"])
        state["solved"] = bool(state["marks"]) and state["marks"][-1] == "GGGGG"

    async def env_response(self, messages: vf.Messages, state: vf.State, **kwargs) -> vf.Messages:
        guess = (self.parser.parse_answer(messages) or "").strip().lower()
        left = self.max_turns - len(state["trajectory"])
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
            reply = [{"role": "user", "content": f"{guess.upper()} -> {marks}. Solved!"}]
            state["final_env_response"] = reply  # the game is over: no further model call
            return reply
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

    def correct_answer(completion, answer, **kwargs) -> float:
        _, marks = replay(parser, completion, answer)
        return 1.0 if marks and marks[-1] == "GGGGG" else 0.0

    def partial_credit(completion, answer, **kwargs) -> float:
        """Best guess: 0.2 per green, 0.1 per yellow."""
        _, marks = replay(parser, completion, answer)
        return max((0.2 * m.count("G") + 0.1 * m.count("Y") for m in marks), default=0.0)

    def efficiency(completion, answer, **kwargs) -> float:
        guesses, marks = replay(parser, completion, answer)
        if not marks or marks[-1] != "GGGGG":
            return 0.0
        return (max_turns - len(guesses) + 1) / max_turns

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
