"""uppercase: rewrite a few words in capital letters (the CPU RL example's task).

The reward is the ``difflib.SequenceMatcher`` ratio between the whole reply and the exact
uppercase text, 2·matches / (len(reply) + len(target)), case-sensitive. It cannot be gamed the
ways an RL policy finds first: echoing the input scores ~0.1 (only the spaces match), a short
reply loses the length it leaves out, and chatter around the answer dilutes it. Only the answer
itself, in full, scores 1.
"""

from __future__ import annotations

import random
from difflib import SequenceMatcher

import verifiers as vf

WORDS = (
    "apple river stone cloud garden yellow window silver forest candle bridge mirror planet "
    "orange valley summer winter castle pencil rocket island meadow thunder shadow harbor "
    "lantern violet copper desert falcon marble canyon breeze ember glacier"
).split()

SYSTEM_PROMPT = (
    "Rewrite the given words in capital letters and nothing else. Example: 'red blue' -> 'RED BLUE'"
)


def make_rows(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        text = " ".join(rng.sample(WORDS, rng.randint(2, 4)))
        rows.append(
            {
                "question": f"Rewrite in capital letters: {text}",
                "answer": text.upper(),
                "info": {"text": text},
            }
        )
    return rows


def load_environment(
    num_train_examples: int = 1000, num_eval_examples: int = 100, seed: int = 0
) -> vf.Environment:
    parser = vf.Parser()

    def last_reply(completion) -> str:
        replies = parser.get_assistant_messages(completion)
        return (replies[-1].get("content") or "").strip() if replies else ""

    def similarity(completion, answer, **kwargs) -> float:
        """Similarity of the whole reply to the exact uppercase text (1.0 = exact)."""
        return SequenceMatcher(None, last_reply(completion), answer, autojunk=False).ratio()

    def exact(completion, answer, **kwargs) -> float:
        """1 when the reply is exactly the answer (a metric, weight 0)."""
        return float(last_reply(completion) == answer)

    rubric = vf.Rubric(funcs=[similarity, exact], weights=[1.0, 0.0], parser=parser)
    return vf.SingleTurnEnv(
        dataset=make_rows(num_train_examples, seed),
        eval_dataset=make_rows(num_eval_examples, seed + 1),
        system_prompt=SYSTEM_PROMPT,
        parser=parser,
        rubric=rubric,
    )
