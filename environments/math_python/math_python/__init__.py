"""math-python: arithmetic word problems solved with a sandboxed Python tool, checked by MathRubric."""

from __future__ import annotations

import random

import verifiers as vf

SYSTEM_PROMPT = """Solve the problem. You have a `python` tool (a persistent REPL): use it for the arithmetic.
When you are done, reply with the final number as \\boxed{answer}."""

TEMPLATES = [
    (
        "A warehouse has {a} crates with {b} items each. {c} items are shipped out. How many items remain?",
        lambda a, b, c: a * b - c,
    ),
    (
        "A factory makes {a} bolts per hour for {b} hours, then packs them into boxes of {c}. How many full boxes?",
        lambda a, b, c: (a * b) // c,
    ),
    (
        "A train travels {a} km per hour for {b} hours and then {c} more km. How far does it travel in total?",
        lambda a, b, c: a * b + c,
    ),
    (
        "{a} students each bring {b} cans, and a teacher adds {c} cans. How many cans are there?",
        lambda a, b, c: a * b + c,
    ),
]


def make_rows(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        template, solve = rng.choice(TEMPLATES)
        a, b, c = rng.randint(120, 999), rng.randint(12, 99), rng.randint(7, 97)
        rows.append({"question": template.format(a=a, b=b, c=c), "answer": str(solve(a, b, c))})
    return rows


def load_environment(
    num_train_examples: int = 500,
    num_eval_examples: int = 50,
    seed: int = 0,
    max_turns: int = 5,
    sandbox_mode: str = "auto",
) -> vf.Environment:
    parser = vf.Parser(extract_fn=vf.extract_boxed_answer)
    rubric = vf.RubricGroup([vf.MathRubric(parser=parser), vf.ToolRubric()])
    return vf.PythonEnv(
        dataset=make_rows(num_train_examples, seed),
        eval_dataset=make_rows(num_eval_examples, seed + 1),
        system_prompt=SYSTEM_PROMPT,
        parser=parser,
        rubric=rubric,
        max_turns=max_turns,
        sandbox_mode=sandbox_mode,
    )
