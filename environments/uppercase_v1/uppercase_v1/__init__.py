"""uppercase-v1: the ``uppercase`` task as a v1 taskset (rewrite a few words in capital
letters), the CPU RL example of a v1 taskset (``examples/rl/uppercase_v1_cpu.toml``).

The reward is the ``difflib.SequenceMatcher`` ratio between the whole reply and the exact
uppercase text, case-sensitive, as the classic task's: echoing the input scores ~0.1, a short
reply loses what it leaves out, and chatter around the answer dilutes it. ``split`` picks the
train tasks or the held-out ones (another seed), so a trainer can measure held-out reward.
"""

from __future__ import annotations

import random
from difflib import SequenceMatcher
from typing import Literal

import verifiers.v1 as vf

WORDS = (
    "apple river stone cloud garden yellow window silver forest candle bridge mirror planet "
    "orange valley summer winter castle pencil rocket island meadow thunder shadow harbor "
    "lantern violet copper desert falcon marble canyon breeze ember glacier"
).split()

SYSTEM_PROMPT = (
    "Rewrite the given words in capital letters and nothing else. Example: 'red blue' -> 'RED BLUE'"
)


class UppercaseData(vf.TaskData):
    answer: str
    """The words in capital letters."""


class UppercaseTask(vf.Task[UppercaseData]):
    @vf.reward
    def similarity(self, trace: vf.Trace) -> float:
        """Similarity of the whole reply to the exact uppercase text (1.0 = exact)."""
        return SequenceMatcher(None, trace.last_reply, self.data.answer, autojunk=False).ratio()

    @vf.metric
    def exact(self, trace: vf.Trace) -> float:
        """1 when the reply is exactly the answer."""
        return float(trace.last_reply == self.data.answer)


class UppercaseConfig(vf.TasksetConfig):
    split: Literal["train", "eval"] = "train"
    """The train tasks, or the held-out ones (generated with ``seed + 1``)."""
    num_train_examples: int = 1000
    num_eval_examples: int = 100
    seed: int = 0


class UppercaseTaskset(vf.Taskset[UppercaseTask, UppercaseConfig]):
    def load(self) -> list[UppercaseTask]:
        config = self.config
        held_out = config.split == "eval"
        rng = random.Random(config.seed + held_out)
        tasks = []
        for i in range(config.num_eval_examples if held_out else config.num_train_examples):
            text = " ".join(rng.sample(WORDS, rng.randint(2, 4)))
            data = UppercaseData(
                idx=i,
                prompt=f"Rewrite in capital letters: {text}",
                system_prompt=SYSTEM_PROMPT,
                answer=text.upper(),
            )
            tasks.append(UppercaseTask(data, config.task))
        return tasks


__all__ = ["UppercaseTaskset"]
