"""MathRubric: answers checked for mathematical equivalence with math-verify."""

from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

from math_verify import parse, verify
from math_verify.errors import TimeoutException as MathVerifyTimeout

from verifiers import classic
from verifiers.data import extract_boxed_answer
from verifiers.parsers.maybe_think_parser import MaybeThinkParser
from verifiers.parsers.parser import Parser
from verifiers.rubrics.rubric import Rubric
from verifiers.types import Messages

_executor: ThreadPoolExecutor | None = None
logging.getLogger("math_verify").setLevel(logging.ERROR)


def verify_response(
    response: str, answer: str, max_verify_chars: int, timeout_seconds: float = 5
) -> tuple[float, float]:
    """(score, seconds taken) for one response. math-verify's own failures, its timeout
    included (a ``BaseException``), score 0; ``CancelledError`` and ``KeyboardInterrupt`` pass.

    math-verify's internal timeouts use SIGALRM, which only works on the main thread; the
    rubric bounds the wall time itself (``MathRubric.timeout``).
    """
    start = time.perf_counter()
    if not response or len(response) > max_verify_chars:
        return 0.0, time.perf_counter() - start
    try:
        gold = parse("\\boxed{" + str(answer) + "}", parsing_timeout=None)
        pred = parse("\\boxed{" + response + "}", parsing_timeout=None)
        score = 1.0 if pred and verify(gold, pred, timeout_seconds=None) else 0.0
    except (Exception, MathVerifyTimeout):
        score = 0.0
    return score, time.perf_counter() - start


class MathRubric(Rubric):
    """1.0 when the parsed response equals the answer mathematically, else 0.0.

    The metric is named as the environment's release names it: ``correct_answer`` from
    verifiers 0.1.9 on, ``correct_answer_reward_func`` before. The response is parsed with
    ``parser`` (by default the last ``\\boxed{}`` after any think block; before verifiers 0.1.12
    the whole reply when it has none); checks run in a thread bounded by ``timeout_seconds``,
    and answers over ``max_verify_chars`` score 0 (default: the release's, 50,000 from 0.1.12),
    so a pathological expression cannot hold the verifier.
    """

    MAX_VERIFY_CHARS = classic.Release(classic.LATEST).math_max_verify_chars

    def __init__(
        self,
        funcs=None,
        weights=None,
        parser: Parser | None = None,
        max_workers: int = 2,
        timeout_seconds: float = 5.0,
        max_verify_chars: int | None = None,
        timeout: float | None = None,
    ):
        release = classic.current()
        if parser is None:
            parser = MaybeThinkParser(
                extract_fn=partial(extract_boxed_answer, strict=True)
                if release.math_needs_boxed
                else extract_boxed_answer
            )
        super().__init__(funcs=funcs, weights=weights, parser=parser)
        self.timeout = self.timeout_seconds = float(
            timeout if timeout is not None else timeout_seconds
        )
        self.max_verify_chars = (
            max_verify_chars if max_verify_chars is not None else release.math_max_verify_chars
        )
        self.max_workers = max_workers
        if release.math_metric_name == "correct_answer":
            self.add_reward_func(self.correct_answer)
        else:
            self.add_reward_func(self.correct_answer_reward_func)

    async def correct_answer(self, completion: Messages, answer: Any, **kwargs: Any) -> float:
        global _executor
        response = self.parser.parse_answer(completion) or ""
        if not response.strip() or len(response) > self.max_verify_chars:
            return 0.0
        if _executor is None:
            _executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="math-verify")
        loop = asyncio.get_running_loop()
        try:
            score, _ = await asyncio.wait_for(
                loop.run_in_executor(
                    _executor, verify_response, response, str(answer), self.max_verify_chars
                ),
                self.timeout,
            )
        except TimeoutError:
            return 0.0
        return score

    async def correct_answer_reward_func(
        self, completion: Messages, answer: Any, **kwargs: Any
    ) -> float:
        """The metric under its verifiers 0.1.8 name."""
        return await self.correct_answer(completion, answer)
