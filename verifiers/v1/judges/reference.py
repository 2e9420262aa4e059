"""The ``reference`` judge: is the response the task's reference answer, in substance?

An empty response scores 0 without a call; a reply with neither verdict label raises (a
judge failure errors the rollout instead of scoring the model)."""

from __future__ import annotations

from pathlib import Path
from typing import cast

from pydantic import model_validator

from verifiers.v1.configs.judge import JudgeConfig
from verifiers.v1.judge import (
    Judge,
    JudgeResponse,
    JudgeView,
    judge_answer,
    judge_question,
    judge_response,
    judge_verdict,
)
from verifiers.v1.task_data import TaskData
from verifiers.v1.trace import Trace
from verifiers.v1.types import ID

REFERENCE_PROMPT = (Path(__file__).parent / "reference.txt").read_text(encoding="utf-8")


class ReferenceJudgeConfig(JudgeConfig):
    id: ID = "reference"
    answer_field: str = "answer"
    """The task field with the reference answer (a list: any one of its items)."""
    question_field: str = ""
    """The task field shown as the question (empty: the task prompt as text)."""
    view: JudgeView = "last_reply"
    """What is graded: the final reply (default) or the whole transcript."""
    choices: tuple[str, str] = ("yes", "no")
    """The (correct, incorrect) verdict labels the prompt asks for; correct scores 1.0."""

    @model_validator(mode="after")
    def _distinct_choices(self) -> ReferenceJudgeConfig:
        positive, negative = self.choices
        if not positive or not negative or positive.upper() == negative.upper():
            raise ValueError(
                f"`choices` must be two distinct, non-empty verdict labels (got {self.choices!r})"
            )
        return self


class ReferenceJudge(Judge[float, ReferenceJudgeConfig]):
    prompt = REFERENCE_PROMPT

    def parse(self, response: JudgeResponse[float]) -> float:
        positive = self.config.choices[0]
        return 1.0 if judge_verdict(response.text, self.config.choices) == positive else 0.0

    async def score(self, task: TaskData, trace: Trace) -> float:
        answer = judge_answer(task, self.config.answer_field, "reference")
        response = judge_response(trace, self.config.view)
        if not response.strip():
            return 0.0
        positive, negative = self.config.choices
        result = await self.evaluate(
            trace=trace,
            question=judge_question(task, self.config.question_field),
            answer=answer,
            response=response,
            positive=positive,
            negative=negative,
        )
        return cast(float, result.parsed)


__all__ = ["ReferenceJudge", "ReferenceJudgeConfig"]
