"""The v1 wire types: messages, tools, model responses and their token carriers.

These are the shapes that cross every v1 boundary (task prompts, the message graph on a
trace, a model call's response), so they are pydantic models with a ``role``/``type``
discriminator; ``verifiers.v1`` re-exports them. The classic API keeps its own message types
(``verifiers.messages``); these follow upstream 0.3's ``verifiers.v1.types`` field for field.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, AliasChoices, BaseModel, ConfigDict, Field
from typing_extensions import TypedDict

from verifiers.v1.multimodal import MultiModalData


class TextContentPart(BaseModel):
    type: Literal["text"] = "text"
    text: str


class ImageUrlSource(BaseModel):
    url: str


class ImageUrlContentPart(BaseModel):
    type: Literal["image_url"] = "image_url"
    image_url: ImageUrlSource


ContentPart = Annotated[TextContentPart | ImageUrlContentPart, Field(discriminator="type")]
MessageContent = str | list[ContentPart]


def content_to_parts(content: Any) -> MessageContent:
    """OpenAI-style content (a string or a list of part dicts) as typed parts; unknown part
    types are dropped."""
    if not isinstance(content, list):
        return content or ""
    parts: list[TextContentPart | ImageUrlContentPart] = []
    for part in content:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "text":
            parts.append(TextContentPart(text=part.get("text", "")))
        elif part.get("type") == "image_url":
            source = part.get("image_url") or {}
            parts.append(ImageUrlContentPart(image_url=ImageUrlSource(url=source.get("url", ""))))
    return list(parts)


def content_text(content: MessageContent | None) -> str:
    """The text of message content; image parts contribute nothing."""
    if isinstance(content, str):
        return content
    return "\n".join(part.text for part in content or [] if isinstance(part, TextContentPart))


class SystemMessage(BaseModel):
    role: Literal["system"] = "system"
    content: MessageContent


class UserMessage(BaseModel):
    role: Literal["user"] = "user"
    content: MessageContent


class ToolCall(BaseModel):
    id: str
    name: str
    arguments: str
    """The arguments as the model wrote them (a JSON string, possibly malformed)."""


class AssistantMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str | None = None
    reasoning_content: str | None = None
    tool_calls: list[ToolCall] | None = None
    provider_state: list[dict[str, Any]] | None = None
    """Provider items (signed or encrypted reasoning) replayed verbatim on the next call."""


class ToolMessage(BaseModel):
    role: Literal["tool"] = "tool"
    tool_call_id: str
    content: MessageContent
    name: str | None = None


Message = Annotated[
    SystemMessage | UserMessage | AssistantMessage | ToolMessage, Field(discriminator="role")
]
Messages = list[Message]


class Tool(BaseModel):
    name: str
    description: str
    parameters: dict[str, Any]
    strict: bool | None = None


FinishReason = Literal["stop", "length", "tool_calls"] | None


class Usage(BaseModel):
    """Token accounting of one or more model calls. ``prompt_tokens`` leaves out cache reads
    (``cached_input_tokens``); ``input_tokens`` counts both."""

    prompt_tokens: int
    completion_tokens: int
    cached_input_tokens: int | None = None
    reasoning_tokens: int | None = None
    cost: float | None = None

    @classmethod
    def from_openai(cls, usage: Any | None) -> Usage | None:
        """A chat completion's ``usage``: the ``ChatCompletion``'s object or the server's
        JSON dict (``LeanChatClient.create_json``)."""
        from verifiers.clients.responses import field

        if usage is None:
            return None
        cached = field(field(usage, "prompt_tokens_details"), "cached_tokens")
        reasoning = field(field(usage, "completion_tokens_details"), "reasoning_tokens")
        return cls(
            prompt_tokens=field(usage, "prompt_tokens") - (cached or 0),
            completion_tokens=field(usage, "completion_tokens"),
            cached_input_tokens=cached,
            reasoning_tokens=reasoning,
            cost=field(usage, "cost"),
        )

    @classmethod
    def aggregate(cls, usages: Iterable[Usage]) -> Usage | None:
        """The sum of ``usages`` (None for none). An optional count is summed over the calls
        that report it, and stays None only when no call does."""
        items = list(usages)
        if not items:
            return None

        def optional_sum(values: list[Any]) -> Any:
            present = [v for v in values if v is not None]
            return sum(present) if present else None

        return cls(
            prompt_tokens=sum(u.prompt_tokens for u in items),
            completion_tokens=sum(u.completion_tokens for u in items),
            cached_input_tokens=optional_sum([u.cached_input_tokens for u in items]),
            reasoning_tokens=optional_sum([u.reasoning_tokens for u in items]),
            cost=optional_sum([u.cost for u in items]),
        )

    @property
    def input_tokens(self) -> int:
        return self.prompt_tokens + (self.cached_input_tokens or 0)

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.completion_tokens


class RoutedExperts(TypedDict):
    """An MoE routing payload from the inference server: base64 uint8
    ``[tokens, layers, top_k]`` starting at prompt position ``start``."""

    data: Any
    shape: list[int]
    start: int


@dataclass
class KeptTokens:
    """Sampling-replay masks: ``ids`` (every kept set, concatenated) and ``counts`` (the kept
    set's size per completion token). Base64 on a response, int32 arrays on a node."""

    ids: Any
    counts: Any


class TurnTokens(BaseModel):
    """The token ids (and logprobs) of one model call. The fields after ``completion_logprobs``
    are carried to the message graph's commit and never serialized."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    prompt_ids: list[int] = Field(default_factory=list)
    completion_ids: list[int] = Field(default_factory=list)
    completion_logprobs: list[float] = Field(default_factory=list)
    message_spans: list[tuple[int, int] | None] | None = Field(default=None, exclude=True)
    is_content: list[bool] | None = Field(default=None, exclude=True)
    multi_modal_data: MultiModalData | None = Field(default=None, exclude=True)
    routed_experts: RoutedExperts | None = Field(default=None, exclude=True)
    kept_tokens: KeptTokens | None = Field(default=None, exclude=True)


class Response(BaseModel):
    id: str
    created: int
    model: str
    message: AssistantMessage
    finish_reason: FinishReason
    usage: Usage | None = None
    tokens: TurnTokens | None = None
    raw: dict[str, Any] | None = Field(default=None, exclude=True, repr=False)


class SamplingConfig(BaseModel):
    """Sampling settings; provider-specific keys pass through."""

    model_config = ConfigDict(extra="allow")
    temperature: float | None = None
    top_p: float | None = None
    reasoning_effort: str | None = None
    max_tokens: int | None = Field(
        None, validation_alias=AliasChoices("max_tokens", "max_completion_tokens")
    )


Sampling = SamplingConfig


def _check_plugin_id(value: str) -> str:
    """A plugin id is empty (none chosen) or an environment id of the one grammar
    (``name``, ``owner/name``, ``owner/name@version``)."""
    if value:
        from verifiers.loading.env_id import EnvId

        EnvId.parse(value)
    return value


ID = Annotated[str, AfterValidator(_check_plugin_id)]
"""A taskset, harness, judge or env id: ``name``, ``owner/name`` or ``owner/name@version``."""
