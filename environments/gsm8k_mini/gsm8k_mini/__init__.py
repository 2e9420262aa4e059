"""gsm8k-mini: grade-school math word problems (shipped), answers checked with MathRubric."""

from __future__ import annotations

import json
from pathlib import Path

import verifiers as vf
from verifiers import extract_boxed_answer

DATA = Path(__file__).parent / "data"
SYSTEM_PROMPT = "Solve the problem step by step, then give the final number as \\boxed{answer}."


def read_split(split: str) -> list[dict]:
    with (DATA / f"{split}.jsonl").open() as f:
        return [json.loads(line) for line in f]


def load_environment(
    system_prompt: str = SYSTEM_PROMPT, use_think: bool = False, num_few_shot: int = 0
) -> vf.Environment:
    parser = (
        vf.ThinkParser(extract_fn=extract_boxed_answer)
        if use_think
        else vf.Parser(extract_fn=extract_boxed_answer)
    )
    train = read_split("train")
    few_shot = []
    for row in train[:num_few_shot]:
        few_shot += [
            {"role": "user", "content": row["question"]},
            {
                "role": "assistant",
                "content": row["solution"].split("####")[0].strip()
                + f" \\boxed{{{row['answer']}}}",
            },
        ]
    rubric = vf.MathRubric(parser=parser)
    return vf.SingleTurnEnv(
        dataset=train[num_few_shot:],
        eval_dataset=read_split("test"),
        system_prompt=system_prompt,
        few_shot=few_shot or None,
        parser=parser,
        rubric=rubric,
    )
