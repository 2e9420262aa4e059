"""Data that crosses boundaries: messages, rollout state, trajectory steps, generate outputs.

Messages stay plain dicts in the OpenAI wire shape (the classic verifiers contract), so environments
can build and inspect them without wrappers; anything that leaves the process (results files, the
hub) is described by the pydantic models in ``verifiers.results.schema``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

MessageType = Literal["chat", "completion"]


class ChatMessage(TypedDict, total=False):
    role: str
    content: Any
    name: str
    tool_calls: list[dict[str, Any]]
    tool_call_id: str
    reasoning_content: str


ChatMessages = list[ChatMessage]
Message = ChatMessage | str
Messages = str | list[ChatMessage]
Info = dict[str, Any]
SamplingArgs = dict[str, Any]
RewardFunc = Callable[..., float | Awaitable[float]]
GroupRewardFunc = Callable[..., list[float] | Awaitable[list[float]]]


class ModelResponse(dict):
    """A model server's JSON reply, readable both as a dict and by attribute.

    Classic environments read ``state["responses"][-1].choices[0].message.content``; building the
    openai client's pydantic objects for every reply costs more than the rest of the request path,
    so the reply stays a dict and attribute access wraps nested values on demand.
    """

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        try:
            return _wrap(self[name])
        except KeyError:
            if name.startswith("__"):
                raise AttributeError(name) from None
            return None

    def model_dump(self, **_: Any) -> dict[str, Any]:
        return dict(self)


def _wrap(value: Any) -> Any:
    if isinstance(value, dict) and not isinstance(value, ModelResponse):
        return ModelResponse(value)
    if isinstance(value, list):
        return [_wrap(v) for v in value]
    return value


class TokenData(TypedDict, total=False):
    prompt_ids: list[int]
    prompt_mask: list[int]
    completion_ids: list[int]
    completion_mask: list[int]
    completion_logprobs: list[float]


class TrajectoryStep(TypedDict, total=False):
    """One model call inside a rollout: what the model saw and what it produced."""

    prompt: Messages
    completion: Messages
    response: ModelResponse
    tokens: TokenData | None
    reward: float | None
    advantage: float | None
    extras: dict[str, Any]


class RolloutInput(TypedDict, total=False):
    prompt: Messages
    answer: str
    info: Info
    task: str
    example_id: int


INPUT_FIELDS = ("prompt", "answer", "info", "task", "example_id")


class State(dict):
    """Mutable per-rollout state. Input fields read and write through to ``state["input"]``.

    Keeping the dataset row in one place means an environment that edits ``state["answer"]`` or
    ``state["info"]`` sees the same object everywhere, and the row is saved exactly once.
    """

    def __getitem__(self, key: str) -> Any:
        if key in INPUT_FIELDS:
            row = dict.get(self, "input")
            if row is not None and key in row:
                return row[key]
        return dict.__getitem__(self, key)

    def __setitem__(self, key: str, value: Any) -> None:
        row = dict.get(self, "input") if key in INPUT_FIELDS else None
        if row is not None:
            row[key] = value
        else:
            dict.__setitem__(self, key, value)

    def __contains__(self, key: object) -> bool:
        if key in INPUT_FIELDS:
            row = dict.get(self, "input")
            if row is not None and key in row:
                return True
        return dict.__contains__(self, key)

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    def setdefault(self, key: str, default: Any = None) -> Any:
        if key not in self:
            self[key] = default
        return self[key]


@dataclass
class RolloutScore:
    reward: float
    metrics: dict[str, float] = field(default_factory=dict)


@dataclass
class RolloutScores:
    reward: list[float]
    metrics: dict[str, list[float]] = field(default_factory=dict)


@dataclass
class GenerateOutputs:
    """Column-wise results of ``Environment.generate``/``evaluate`` (the classic field names)."""

    prompt: list[Messages] = field(default_factory=list)
    completion: list[Messages] = field(default_factory=list)
    answer: list[str] = field(default_factory=list)
    state: list[State] = field(default_factory=list)
    task: list[str] = field(default_factory=list)
    info: list[Info] = field(default_factory=list)
    example_id: list[int] = field(default_factory=list)
    reward: list[float] = field(default_factory=list)
    metrics: dict[str, list[float]] = field(default_factory=dict)
    metadata: Any = None  # verifiers.results.schema.RunMetadata
    path: str | None = None

    def __len__(self) -> int:
        return len(self.reward)
