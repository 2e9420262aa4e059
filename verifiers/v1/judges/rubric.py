"""The ``rubric`` judge: a weighted list of criteria (a TOML or JSON file), each answered
with one of its ordered choices; the reward is the weighted mean of the choices' ranks and
each criterion's score is a ``<reward name>/<criterion>`` metric.

By default one call grades every criterion, the reply read as a JSON ``verdicts`` object;
``max_criteria`` splits them into concurrent calls, ``structured_output`` asks the endpoint
for a schema instead. A reply that does not verdict exactly the criteria asked raises."""

from __future__ import annotations

import asyncio
import json
import math
import re
import tomllib
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, cast

from pydantic import BaseModel, Field, TypeAdapter, field_validator

from verifiers.v1.configs.judge import JudgeConfig
from verifiers.v1.judge import Judge, JudgeView, judge_answer, judge_question, judge_response
from verifiers.v1.task_data import TaskData
from verifiers.v1.trace import Trace
from verifiers.v1.types import ID

RUBRIC_PROMPT = (Path(__file__).parent / "rubric.txt").read_text(encoding="utf-8")

CriterionWeight = Annotated[float, Field(ge=0, allow_inf_nan=False)]

VERDICTS_FORMAT = (
    "\n\nReply with a single JSON object and no other text:\n"
    '{"verdicts": [{"name": "<criterion name>", "reason": "<one sentence on the evidence '
    'in the response>", "verdict": "<one of the options>"}]}\n'
    "with one entry for every criterion. Write each reason before choosing its verdict."
)
"""Appended to the prompt when the reply is read as text (no structured output)."""


class Criterion(BaseModel):
    name: str
    """The criterion's key (its metric, its ``weights`` override)."""
    text: str
    weight: CriterionWeight = 1.0
    choices: list[str] = Field(default_factory=lambda: ["no", "yes"], min_length=2)
    """The answers allowed, worst first: the first scores 0, the last 1, the rest by rank."""

    @field_validator("choices")
    @classmethod
    def _distinct(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError(f"`choices` lists duplicate options: {value}")
        return value


class CriterionVerdict(BaseModel):
    name: str
    reason: str
    verdict: str


class RubricVerdicts(BaseModel):
    verdicts: list[CriterionVerdict]


_CRITERIA = TypeAdapter(list[Criterion])


def load_criteria(path: Path, weights: dict[str, float] | None = None) -> list[Criterion]:
    """The criteria of a rubric file, with ``weights`` laid over theirs."""
    text = Path(path).read_text(encoding="utf-8")
    data: Any = tomllib.loads(text) if Path(path).suffix.lower() == ".toml" else json.loads(text)
    criteria = _CRITERIA.validate_python(data.get("criteria", []) if isinstance(data, dict) else data)
    if not criteria:
        raise ValueError(f"the rubric {path} has no criteria")
    names = [c.name for c in criteria]
    if len(set(names)) != len(names):
        raise ValueError(f"the rubric {path} has duplicate criterion names")
    overrides = dict(weights or {})
    unknown = sorted(set(overrides) - set(names))
    if unknown:
        raise ValueError(f"`weights` name no criterion of {path}: {unknown}")
    criteria = [c.model_copy(update={"weight": overrides.get(c.name, c.weight)}) for c in criteria]
    total = sum(c.weight for c in criteria)
    if not math.isfinite(total):
        raise ValueError(f"the rubric {path} has a non-finite total weight")
    if total <= 0:
        raise ValueError(f"the rubric {path} has no positive criterion weight")
    return criteria


def verdicts_in(text: str) -> dict[str, Any] | None:
    """The first JSON object in ``text`` with a ``verdicts`` key (prose and a copied format
    example, which is not valid JSON, are skipped)."""
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            found, _ = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            found = None
        if isinstance(found, dict) and "verdicts" in found:
            return found
        start = text.find("{", start + 1)
    return None


def score_verdicts(
    verdicts: list[CriterionVerdict], criteria: list[Criterion], asked: str
) -> dict[str, float]:
    """Each criterion's score from a reply that verdicts exactly ``criteria``, once each."""
    wanted = {c.name: c for c in criteria}
    answers: dict[str, str] = {}
    for verdict in verdicts:
        if verdict.name in answers:
            raise ValueError(f"the judge answered {verdict.name!r} twice")
        answers[verdict.name] = verdict.verdict
    if set(answers) != set(wanted):
        raise ValueError(
            f"the judge's verdicts name {sorted(answers)}, expected {asked} criteria "
            f"{sorted(wanted)}"
        )
    scores: dict[str, float] = {}
    for name, answer in answers.items():
        choices = wanted[name].choices
        if answer not in choices:
            raise ValueError(f"the judge answered {answer!r} for {name!r}, expected one of {choices}")
        scores[name] = choices.index(answer) / (len(choices) - 1)
    return scores


class RubricJudgeConfig(JudgeConfig):
    id: ID = "rubric"
    path: Path
    """The rubric: a ``.toml`` or ``.json`` file with a ``criteria`` list (relative to the
    working directory)."""
    weights: dict[str, CriterionWeight] = Field(default_factory=dict)
    """Criterion weights by name, over the file's."""
    question_field: str = ""
    """The task field shown as the question (empty: the task prompt as text)."""
    answer_field: str = ""
    """A task field with a reference solution to show the judge (empty: none)."""
    view: JudgeView = "full_trace"
    """What is graded: the whole transcript (default) or the final reply."""
    max_criteria: int | None = Field(default=None, ge=1)
    """Criteria per call (None: all in one call)."""
    structured_output: bool = False
    """Ask the endpoint for a JSON schema instead of reading JSON out of a text reply."""


def _fence(text: str) -> str:
    longest = max((len(run) for run in re.findall(r"`+", text)), default=2)
    return "`" * (longest + 1)


class RubricJudge(Judge[RubricVerdicts, RubricJudgeConfig]):
    prompt = RUBRIC_PROMPT
    schema = RubricVerdicts

    @cached_property
    def criteria(self) -> list[Criterion]:
        return load_criteria(self.config.path, self.config.weights)

    def _reference(self, task: TaskData) -> str:
        if not self.config.answer_field:
            return ""
        answer = judge_answer(task, self.config.answer_field, "rubric")
        fence = _fence(answer)
        return f"\nReference solution (a correct answer, to compare with):\n{fence}\n{answer}\n{fence}\n"

    async def grade(self, task: TaskData, trace: Trace, batch: list[Criterion]) -> dict[str, float]:
        """One judge call over ``batch``: its criteria's scores."""
        fields = {
            "question": judge_question(task, self.config.question_field),
            "reference": self._reference(task),
            "response": judge_response(trace, self.config.view),
            "criteria": "\n".join(
                f"- {c.name}: {c.text} (one of, worst to best: {', '.join(c.choices)})"
                for c in batch
            ),
        }
        if self.config.structured_output:
            result = await self.evaluate(trace=trace, **fields)
            verdicts = cast(RubricVerdicts, result.parsed).verdicts
        else:
            prompt = cast(str, self.build_messages(**fields)) + VERDICTS_FORMAT
            result = await self.complete(prompt, trace=trace)
            found = verdicts_in(result.text)
            if found is None:
                raise ValueError(f"the judge's reply holds no verdicts object: {result.text!r}")
            verdicts = RubricVerdicts.model_validate(found).verdicts
        return score_verdicts(verdicts, batch, "the batch's")

    async def score(self, task: TaskData, trace: Trace) -> float:
        criteria = self.criteria
        size = self.config.max_criteria or len(criteria)
        calls = [
            asyncio.ensure_future(self.grade(task, trace, criteria[i : i + size]))
            for i in range(0, len(criteria), size)
        ]
        try:
            graded = await asyncio.gather(*calls)
        except BaseException:
            for call in calls:
                call.cancel()
            await asyncio.gather(*calls, return_exceptions=True)
            raise
        scores = {name: value for batch in graded for name, value in batch.items()}
        for c in criteria:
            trace.record_metric(f"{self.reward_name}/{c.name}", scores[c.name])
        return sum(c.weight * scores[c.name] for c in criteria) / sum(c.weight for c in criteria)


__all__ = [
    "Criterion",
    "CriterionVerdict",
    "RubricJudge",
    "RubricJudgeConfig",
    "RubricVerdicts",
    "load_criteria",
    "score_verdicts",
]
