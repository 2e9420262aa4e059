"""An LLM judge: one chat call to an OpenAI-compatible endpoint with a prompt filled from
the task and the trace, and a verdict read from the reply.

A subclass sets ``prompt`` (a template with ``{field}`` placeholders) or overrides
``build_messages``, and ``parse`` (reply → verdict); ``schema`` asks for structured output.
Task code can build one and ``await judge.evaluate(trace=..., question=..., ...)``; a judge
that also implements ``score`` is a plugin, named by id in ``TaskConfig.judges`` and run by
``Task.score`` after the task's rewards (built-ins: ``verifiers.v1.judges``).

Every call made with ``trace=`` lands on it (``trace.info["judge"]``, usage in
``trace.extra_usage``) even when parsing the reply fails, since the call was paid for. A
reply that cannot be read raises: a judge's failure is the rollout's error, not a zero
against the model.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, Literal, cast

from pydantic import BaseModel
from typing_extensions import TypeVar

from verifiers.v1.chat import message_to_wire, open_client
from verifiers.v1.configs.judge import JudgeConfig, judge_key
from verifiers.v1.generics import concrete_type
from verifiers.v1.scoring import parse_judge_choice
from verifiers.v1.types import Messages, Usage

if TYPE_CHECKING:
    from verifiers.v1.task_data import TaskData
    from verifiers.v1.trace import Trace

ParsedT = TypeVar("ParsedT")
JudgeConfigT = TypeVar("JudgeConfigT", bound=JudgeConfig, default=JudgeConfig)

JudgeView = Literal["last_reply", "full_trace"]
"""What fills a judge's ``{response}``: the final reply, or the whole transcript (reasoning
left out)."""


class JudgeResponse(BaseModel, Generic[ParsedT]):
    text: str
    parsed: ParsedT | None = None
    usage: Usage | None = None


def judge_question(task: TaskData, question_field: str) -> str:
    """The question shown to a judge: the task's ``question_field``, else its prompt as text."""
    if not question_field:
        return task.prompt_text
    value = getattr(task, question_field, None)
    if value is None:
        raise ValueError(
            f"the judge's question_field names no {question_field!r} field on the task "
            "(leave it empty to show the task prompt)"
        )
    return str(value)


def judge_answer(task: TaskData, answer_field: str, judge: str) -> str:
    """A task's reference answer as text (a list: one acceptable answer a line)."""
    value = getattr(task, answer_field, None)
    if value is None:
        raise ValueError(
            f"the {judge} judge found no {answer_field!r} field on the task; set its "
            "`answer_field` to the task's reference-answer field"
        )
    if isinstance(value, (list, tuple)):
        return "\n".join(str(item) for item in value)
    return str(value)


def judge_response(trace: Trace, view: JudgeView) -> str:
    return trace.transcript if view == "full_trace" else trace.last_reply


def judge_verdict(text: str, choices: Sequence[str]) -> str:
    """The verdict label a reply settles on; a reply with none raises."""
    verdict = parse_judge_choice(text, choices)
    if verdict is None:
        raise ValueError(f"the judge gave no {'/'.join(choices)} verdict: {text!r}")
    return verdict


def fill_template(template: str, fields: Mapping[str, Any]) -> str:
    """``template`` with each ``{name}`` of ``fields`` replaced in one pass (other braces and
    unknown placeholders stay as written; a value is never scanned again)."""
    if not fields:
        return template
    pattern = re.compile(r"\{(" + "|".join(re.escape(name) for name in fields) + r")\}")
    return pattern.sub(lambda m: str(fields[m.group(1)]), template)


class Judge(Generic[ParsedT, JudgeConfigT]):
    prompt: str | None = None
    """The prompt template (a config ``prompt`` file replaces it)."""
    schema: type[BaseModel] | None = None
    """A pydantic model to ask structured output for (None: plain text)."""

    def __init__(self, config: JudgeConfigT | None = None) -> None:
        own = concrete_type(type(self), JudgeConfig) or JudgeConfig
        self.config: JudgeConfigT = cast(JudgeConfigT, config if config is not None else own())
        if self.config.prompt is not None:
            self.prompt = self.config.prompt.read_text(encoding="utf-8")

    @property
    def reward_name(self) -> str:
        """The key a plugged judge's reward lands under: the config's ``name``, else its id's
        package name, else the class name in snake case without ``Judge``."""
        key = judge_key(self.config)
        if key:
            return key
        stem = type(self).__name__.removesuffix("Judge")
        return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", stem).lower() or "judge"

    def build_messages(self, **fields: Any) -> str | Messages:
        if self.prompt is None:
            raise ValueError(f"{type(self).__name__} sets no `prompt` (or override build_messages)")
        return fill_template(self.prompt, fields)

    def parse(self, response: JudgeResponse[ParsedT]) -> ParsedT:
        return cast(ParsedT, response.parsed if self.schema is not None else response.text)

    async def score(self, task: TaskData, trace: Trace) -> float | Mapping[str, float]:
        raise NotImplementedError(
            f"{type(self).__name__} implements no `score`: it cannot be plugged in through "
            "`task.judges`; call it from a task's @reward, or implement `score`"
        )

    async def complete(
        self,
        messages: str | Messages,
        *,
        trace: Trace | None = None,
        schema: type[BaseModel] | None = None,
        parse: Callable[[JudgeResponse[Any]], Any] | None = None,
        **sampling: Any,
    ) -> JudgeResponse[Any]:
        """One judge call; with ``trace``, recorded on it whatever happens after the reply."""
        wire = (
            [{"role": "user", "content": messages}]
            if isinstance(messages, str)
            else [message_to_wire(m) for m in messages]
        )
        request: dict[str, Any] = {
            "model": self.config.model,
            "messages": wire,
            **self.config.sampling.model_dump(exclude_none=True),
            **sampling,
        }
        response: JudgeResponse[Any] | None = None
        try:
            async with open_client(self.config) as client:
                if schema is not None:
                    done = await client.beta.chat.completions.parse(
                        response_format=schema, **request
                    )
                    choice = done.choices[0]
                    response = JudgeResponse(
                        text=choice.message.content or "",
                        parsed=choice.message.parsed,
                        usage=Usage.from_openai(done.usage),
                    )
                    if choice.message.refusal is not None:
                        raise RuntimeError(f"the judge refused: {choice.message.refusal}")
                    if response.parsed is None:
                        raise RuntimeError(
                            "the judge's structured reply did not parse "
                            f"(finish_reason={choice.finish_reason})"
                        )
                else:
                    done = await client.chat.completions.create(**request)
                    response = JudgeResponse(
                        text=done.choices[0].message.content or "",
                        usage=Usage.from_openai(done.usage),
                    )
            if parse is not None:
                response.parsed = parse(response)
            return response
        finally:
            if trace is not None and response is not None:
                trace.record_judge(response)

    async def evaluate(self, *, trace: Trace | None = None, **fields: Any) -> JudgeResponse[ParsedT]:
        """Fill the prompt with ``fields``, call the judge, parse the reply."""
        return await self.complete(
            self.build_messages(**fields), trace=trace, schema=self.schema, parse=self.parse
        )
