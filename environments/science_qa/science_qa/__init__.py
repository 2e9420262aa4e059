"""science-qa: physics, chemistry, biology and astronomy questions, multiple choice and numeric,
both graded by ``vf.MathRubric`` on the reply's last ``\\boxed{}``.

A numeric row's answer is an exact decimal (math-verify accepts any equal number: ``12.50``,
``25/2``); a multiple-choice row's answer is its option letter, which math-verify compares as a
symbol (``b`` equals ``B``; ``A, B`` or ``ABCD`` equal none). Questions are generated from
templates and fact tables in ``questions.py``, seeded, so every machine gets the same rows.
"""

from __future__ import annotations

import random
from typing import Any

import verifiers as vf
from science_qa.questions import choice_question, numeric_question

SYSTEM_PROMPT = """Answer the science question. Think briefly if you need to, then give only the final answer in \\boxed{}.
For a calculation, box the number alone, without units (e.g. \\boxed{12.5}). For multiple choice, box the letter (e.g. \\boxed{B})."""


def make_rows(n: int, seed: int, choice_fraction: float = 0.5) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        if rng.random() < choice_fraction:
            topic, question, options, letter = choice_question(rng)
            lines = "\n".join(f"{'ABCD'[i]}. {option}" for i, option in enumerate(options))
            rows.append(
                {
                    "question": f"{question}\n{lines}",
                    "answer": letter,
                    "info": {"format": "multiple_choice", "topic": topic, "options": options},
                }
            )
        else:
            topic, question, answer = numeric_question(rng)
            rows.append(
                {"question": question, "answer": answer, "info": {"format": "numeric", "topic": topic}}
            )
    return rows


def load_environment(
    num_train_examples: int = 2000,
    num_eval_examples: int = 200,
    choice_fraction: float = 0.5,
    seed: int = 0,
    system_prompt: str = SYSTEM_PROMPT,
) -> vf.Environment:
    """
    Args:
        choice_fraction: the share of multiple-choice rows (the rest are numeric).
    """
    if not 0 <= choice_fraction <= 1:
        raise ValueError(f"choice_fraction is a share between 0 and 1, got {choice_fraction}")
    parser = vf.MaybeThinkParser(extract_fn=vf.extract_boxed_answer)
    rubric = vf.MathRubric(parser=parser)

    def boxed(completion, **kwargs) -> float:
        """1 when the reply boxes an answer at all (a metric: format, not correctness)."""
        return float(bool(parser.parse_answer(completion)))

    rubric.add_reward_func(boxed, weight=0.0)
    eval_rows = make_rows(num_eval_examples, seed + 1, choice_fraction)
    held_out = {row["question"] for row in eval_rows}  # a training row never repeats one
    train_rows = [
        row for row in make_rows(num_train_examples, seed, choice_fraction) if row["question"] not in held_out
    ]
    return vf.SingleTurnEnv(
        dataset=train_rows,
        eval_dataset=eval_rows,
        system_prompt=system_prompt,
        parser=parser,
        rubric=rubric,
    )
