"""MathRubric: answers checked for mathematical equivalence with math-verify."""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from verifiers.data import extract_boxed_answer
from verifiers.parsers.parser import Parser
from verifiers.rubrics.rubric import Rubric
from verifiers.types import Messages

_executor: ThreadPoolExecutor | None = None


def _verify(answer: str, response: str) -> float:
    from math_verify import parse, verify

    logging.getLogger("math_verify").setLevel(logging.ERROR)
    # math-verify's own timeouts use SIGALRM, which only works on the main thread; the
    # rubric bounds the time itself (see MathRubric.timeout).
    gold = parse("\\boxed{" + str(answer) + "}", parsing_timeout=None)
    pred = parse("\\boxed{" + response + "}", parsing_timeout=None)
    if not pred:
        return 0.0
    return 1.0 if verify(gold, pred, timeout_seconds=None) else 0.0


class MathRubric(Rubric):
    """``correct_answer_reward_func``: 1.0 when the parsed response equals the answer mathematically.

    The response is parsed with ``parser`` (by default the last ``\\boxed{}``); checks run in a
    thread with a ``timeout`` so a pathological expression cannot stall the event loop.
    """

    def __init__(
        self,
        funcs=None,
        weights=None,
        parser: Parser | None = None,
        timeout: float = 5.0,
        **kwargs: Any,
    ):
        super().__init__(
            funcs=funcs,
            weights=weights,
            parser=parser or Parser(extract_fn=extract_boxed_answer),
            **kwargs,
        )
        self.timeout = timeout
        self.add_reward_func(self.correct_answer_reward_func)

    async def correct_answer_reward_func(
        self, completion: Messages, answer: Any, **kwargs: Any
    ) -> float:
        global _executor
        response = self.parser.parse_answer(completion) or ""
        if not response.strip():
            return 0.0
        if _executor is None:
            _executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="math-verify")
        loop = asyncio.get_running_loop()
        try:
            return await asyncio.wait_for(
                loop.run_in_executor(_executor, _verify, str(answer), response), self.timeout
            )
        except TimeoutError:
            return 0.0
