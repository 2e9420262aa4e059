"""reverse-text: reverse a phrase character by character (XMLParser + LCS similarity reward)."""

from __future__ import annotations

import random
from difflib import SequenceMatcher

import verifiers as vf

WORDS = (
    "apple river stone cloud garden yellow window silver forest candle bridge mirror planet "
    "orange valley summer winter castle pencil rocket island meadow thunder shadow harbor "
    "lantern violet copper desert falcon marble canyon breeze ember glacier"
).split()

SYSTEM_PROMPT = """Reverse the given text character by character.

Respond in this format:
<answer>
...reversed text...
</answer>"""


def make_rows(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        text = " ".join(rng.sample(WORDS, rng.randint(2, 4)))
        rows.append(
            {"question": f"Reverse this text: {text}", "answer": text[::-1], "info": {"text": text}}
        )
    return rows


def load_environment(
    num_train_examples: int = 1000, num_eval_examples: int = 100, seed: int = 0
) -> vf.Environment:
    parser = vf.XMLParser(["answer"], answer_field="answer")

    def lcs_reward(completion, answer, **kwargs) -> float:
        """Similarity of the answer to the exact reversal (1.0 = exact).

        Without <answer> tags the whole reply is compared, so a model that has not learned the
        format still gets a graded signal; the format reward scores the tags separately.
        """
        response = parser.parse_answer(completion)
        if response is None:
            replies = parser.get_assistant_messages(completion)
            response = (replies[-1].get("content") or "") if replies else ""
        return SequenceMatcher(None, response.strip(), answer).ratio()

    format_reward = parser.get_format_reward_func()
    format_reward.__name__ = "format_reward"
    rubric = vf.Rubric(funcs=[lcs_reward, format_reward], weights=[1.0, 0.2], parser=parser)
    return vf.SingleTurnEnv(
        dataset=make_rows(num_train_examples, seed),
        eval_dataset=make_rows(num_eval_examples, seed + 1),
        system_prompt=SYSTEM_PROMPT,
        parser=parser,
        rubric=rubric,
    )
