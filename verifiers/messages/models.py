"""Typed messages, tools and model replies: the data model of verifiers 0.1.11 to 0.3.x.

Environments written for those releases read messages as objects (``m.role``, ``m.content``,
``m.tool_calls[0].name``) and also index them like the dicts of earlier releases
(``m["content"]``, ``m.get("tool_calls")``, ``"content" in m``); both work on every model here.
Equality with a plain dict ignores fields that are ``None``, so ``AssistantMessage(content="4")``
equals ``{"role": "assistant", "content": "4"}`` and a test written against either shape holds.

Environments of earlier releases never see these classes: their messages stay plain dicts
(``verifiers.classic`` decides which an environment gets).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, computed_field


def compact(value: Any) -> Any:
    """``value`` with every ``None``-valued mapping key dropped, recursively (for comparisons)."""
    if isinstance(value, BaseModel):
        value = value.model_dump()
    if isinstance(value, Mapping):
        return {k: compact(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [compact(v) for v in value]
    return value


class MessageModel(BaseModel):
    """A pydantic model that also reads like the mapping it replaces."""

    model_config = ConfigDict(extra="allow")

    def __getitem__(self, key: str) -> Any:
        try:
            return getattr(self, key)
        except AttributeError:
            raise KeyError(key) from None

    def __setitem__(self, key: str, value: Any) -> None:
        setattr(self, key, value)

    def get(self, key: str, default: Any = None) -> Any:
        return getattr(self, key, default)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and hasattr(self, key)

    def keys(self) -> list[str]:
        """The fields that hold a value (``None`` counts as absent), extras included."""
        return [k for k, v in self.model_dump(exclude_none=True).items() if v is not None]

    def items(self) -> list[tuple[str, Any]]:
        return [(k, getattr(self, k)) for k in self.keys()]

    def values(self) -> list[Any]:
        return [getattr(self, k) for k in self.keys()]

    def __iter__(self) -> Iterator[str]:  # type: ignore[override]  # keys, as a mapping iterates
        return iter(self.keys())

    def __len__(self) -> int:
        return len(self.keys())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, BaseModel | Mapping):
            return compact(self) == compact(_comparable(other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # unhashable, as the dict it replaces


def _comparable(other: Any) -> Any:
    """A raw message dict in this module's shape (OpenAI's nested tool calls flattened)."""
    if isinstance(other, Mapping) and other.get("role") == "assistant" and other.get("tool_calls"):
        try:
            return from_raw_message(dict(other))
        except (ValueError, TypeError):
            return other
    return other


class TextContentPart(MessageModel):
    type: Literal["text"] = "text"
    text: str


class ImageUrlSource(MessageModel):
    url: str


class ImageUrlContentPart(MessageModel):
    type: Literal["image_url"] = "image_url"
    image_url: ImageUrlSource


class InputAudioSource(MessageModel):
    data: str
    format: str


class InputAudioContentPart(MessageModel):
    type: Literal["input_audio"] = "input_audio"
    input_audio: InputAudioSource


class GenericContentPart(MessageModel):
    type: str


ContentPart: TypeAlias = (
    TextContentPart
    | ImageUrlContentPart
    | InputAudioContentPart
    | GenericContentPart
    | dict[str, Any]
)
MessageContent: TypeAlias = str | list[ContentPart]


class TextMessage(MessageModel):
    """A raw-text prompt or completion (``message_type="completion"`` environments)."""

    role: Literal["text"] = "text"
    content: str


class SystemMessage(MessageModel):
    role: Literal["system"] = "system"
    content: MessageContent

    @classmethod
    def from_path(cls, path: str | Path) -> SystemMessage:
        """A system message holding a file's text exactly (trailing newlines included)."""
        return cls(content=Path(path).read_text(encoding="utf-8"))


class UserMessage(MessageModel):
    role: Literal["user"] = "user"
    content: MessageContent


class ToolCall(MessageModel):
    """One call the model asked for. ``arguments`` is the JSON text the model wrote.

    ``call.function`` and ``call.type`` give the OpenAI shape too, for code that reads
    ``call["function"]["name"]``.
    """

    id: str
    name: str
    arguments: str

    @property
    def type(self) -> str:
        return "function"

    @property
    def function(self) -> dict[str, str]:
        return {"name": self.name, "arguments": self.arguments}


class AssistantMessage(MessageModel):
    role: Literal["assistant"] = "assistant"
    content: MessageContent | None = None
    reasoning_content: str | None = None
    thinking_blocks: list[Any] | None = None
    tool_calls: list[ToolCall] | None = None


class ToolMessage(MessageModel):
    role: Literal["tool"] = "tool"
    tool_call_id: str
    content: MessageContent


Message: TypeAlias = SystemMessage | UserMessage | AssistantMessage | ToolMessage | TextMessage
Messages: TypeAlias = list[Message]
MESSAGE_CLASSES: tuple[type[MessageModel], ...] = (
    SystemMessage,
    UserMessage,
    AssistantMessage,
    ToolMessage,
    TextMessage,
)


class Tool(MessageModel):
    """A tool the model may call, in the provider-neutral shape (``name``, ``description``,
    ``parameters`` as JSON Schema); each client turns it into its API's own form."""

    name: str
    description: str
    parameters: dict[str, object]
    strict: bool | None = None


class Usage(MessageModel):
    prompt_tokens: int
    reasoning_tokens: int
    completion_tokens: int
    total_tokens: int


class ResponseTokens(MessageModel):
    """Token ids and logprobs exactly as the server sampled them (for training)."""

    prompt_ids: list[int]
    prompt_mask: list[int]
    completion_ids: list[int]
    completion_mask: list[int]
    completion_logprobs: list[float]
    routed_experts: Any | None = None
    multi_modal_data: Any | None = None
    prompt_attribution: Any | None = None


FinishReason = Literal["stop", "length", "tool_calls"] | None


class ResponseMessage(AssistantMessage):
    finish_reason: FinishReason
    is_truncated: bool | None
    tokens: ResponseTokens | None = None


class Response(MessageModel):
    """One model reply, whichever API carried it."""

    id: str
    created: int
    model: str
    usage: Usage | None = None
    message: ResponseMessage


class TimeSpan(MessageModel):
    """A timed span; ``start``/``end`` are ``time.time()`` seconds, ``duration`` derives."""

    start: float = 0.0
    end: float = 0.0

    @computed_field  # type: ignore[prop-decorator]  # pydantic's spelling; mypy cannot see it
    @property
    def duration(self) -> float:
        return self.end - self.start if self.end > 0.0 else 0.0


class TimeSpans(MessageModel):
    spans: list[TimeSpan] = Field(default_factory=list)

    @computed_field  # type: ignore[prop-decorator]  # pydantic's spelling; mypy cannot see it
    @property
    def duration(self) -> float:
        return sum(s.duration for s in self.spans)


class RolloutTiming(MessageModel):
    """Where a rollout's time went: setup, generation, scoring, and each model / environment
    turn. Seconds since the epoch. The 0.1.x keys (``generation_ms``, ``scoring_ms``,
    ``total_ms``, ``model_ms``) read as milliseconds derived from the spans."""

    start_time: float = Field(default_factory=time.time)
    setup: TimeSpan = Field(default_factory=TimeSpan)
    generation: TimeSpan = Field(default_factory=TimeSpan)
    scoring: TimeSpan = Field(default_factory=TimeSpan)
    model: TimeSpans = Field(default_factory=TimeSpans)
    env: TimeSpans = Field(default_factory=TimeSpans)

    @computed_field  # type: ignore[prop-decorator]  # pydantic's spelling; mypy cannot see it
    @property
    def total(self) -> float:
        if self.scoring.end <= 0.0:
            return 0.0
        return self.scoring.end - self.generation.start

    @computed_field  # type: ignore[prop-decorator]  # pydantic's spelling; mypy cannot see it
    @property
    def overhead(self) -> float:
        return (
            self.total
            - self.setup.duration
            - self.model.duration
            - self.env.duration
            - self.scoring.duration
        )

    @property
    def generation_ms(self) -> float:
        return self.generation.duration * 1000.0

    @property
    def scoring_ms(self) -> float:
        return self.scoring.duration * 1000.0

    @property
    def total_ms(self) -> float:
        end = self.scoring.end or self.generation.end
        return max(0.0, end - self.generation.start) * 1000.0 if end else 0.0

    @property
    def model_ms(self) -> float:
        return self.model.duration * 1000.0


# Raw message dicts as typed messages (here, beside the models: their ``__eq__`` compares with
# raw dicts through ``from_raw_message``; ``verifiers.messages.convert`` re-exports them).
_BY_ROLE: dict[str, type[Message]] = {
    "text": TextMessage,
    "system": SystemMessage,
    "user": UserMessage,
    "assistant": AssistantMessage,
    "tool": ToolMessage,
}
_PART_TYPES: dict[str, type[MessageModel]] = {
    "text": TextContentPart,
    "image_url": ImageUrlContentPart,
    "input_audio": InputAudioContentPart,
}


def _typed_content(content: Any) -> Any:
    if not isinstance(content, list):
        return content
    parts = []
    for part in content:
        if isinstance(part, dict) and part.get("type") in _PART_TYPES:
            part = {k: v for k, v in part.items() if v is not None}
            parts.append(_PART_TYPES[part["type"]].model_validate(part))
        else:
            parts.append(part)
    return parts


def tool_call_from_raw(call: Any) -> Any:
    """A tool call in any common shape (OpenAI nested, flat, object) as a ``ToolCall``.

    Arguments that are not a string are JSON-encoded, as the model would have written them; a
    call without an id takes its function name (so its tool message still pairs with it).
    Anything unrecognisable is returned unchanged.
    """
    if isinstance(call, ToolCall):
        return call
    if not isinstance(call, Mapping):
        function = getattr(call, "function", None)
        if function is None:
            return call
        call = {
            "id": getattr(call, "id", None),
            "function": {
                "name": getattr(function, "name", None),
                "arguments": getattr(function, "arguments", None),
            },
        }
    if "name" in call and "arguments" in call and "function" not in call:
        name, arguments = call.get("name"), call.get("arguments")
    else:
        function = call.get("function")
        if not isinstance(function, Mapping):
            return call
        name, arguments = function.get("name"), function.get("arguments")
    if not isinstance(name, str):
        return call
    if not isinstance(arguments, str):
        try:
            arguments = json.dumps(arguments if arguments is not None else {})
        except (TypeError, ValueError):
            arguments = str(arguments)
    call_id = call.get("id")
    return ToolCall(
        id=call_id if isinstance(call_id, str) else name, name=name, arguments=arguments
    )


def from_raw_message(message: Mapping[str, Any]) -> Message:
    """One raw message dict as the typed message of its role."""
    data = dict(message)
    role = data.get("role")
    cls = _BY_ROLE.get(role) if isinstance(role, str) else None
    if cls is None:
        raise ValueError(f"Unknown role: {role!r}")
    data["content"] = _typed_content(data.get("content"))
    if role == "assistant" and isinstance(data.get("tool_calls"), list):
        data["tool_calls"] = [tool_call_from_raw(c) for c in data["tool_calls"]]
    if role != "assistant" and data.get("content") is None and "content" in data:
        data["content"] = ""
    return cls.model_validate(data)
