"""Data that crosses boundaries: messages, rollout state, trajectory steps, generate outputs.

Messages stay plain dicts in the OpenAI wire shape (the classic verifiers contract), so environments
can build and inspect them without wrappers; anything that leaves the process (results files, the
hub) is described by the pydantic models in ``verifiers.results.schema``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
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


class TrajectoryStepTokens(TypedDict, total=False):
    prompt_ids: list[int]
    prompt_mask: list[int]
    completion_ids: list[int]
    completion_mask: list[int]
    completion_logprobs: list[float]
    overlong_prompt: bool
    is_truncated: bool


TokenData = TrajectoryStepTokens


class TrajectoryStep(TypedDict, total=False):
    """One model call inside a rollout: what the model saw and what it produced."""

    prompt: Messages
    completion: Messages
    response: Any
    tokens: TrajectoryStepTokens | None
    reward: float | None
    advantage: float | None
    is_truncated: bool
    trajectory_id: str
    extras: dict[str, Any]


class BaseRolloutInput(TypedDict):
    prompt: Messages
    example_id: int
    task: str


class RolloutInput(BaseRolloutInput, total=False):
    answer: str
    info: Info


class RolloutTiming(TypedDict, total=False):
    start_time: float
    generation_ms: float
    scoring_ms: float
    total_ms: float
    model_ms: float


INPUT_FIELDS = ("prompt", "answer", "task", "info", "example_id")


class State(dict):
    """Mutable per-rollout state; the dataset row lives once, in ``state["input"]``.

    Input fields (``prompt``, ``answer``, ``task``, ``info``, ``example_id``) present in the row
    read and write through to it, and every path agrees: ``state[k]``, ``get``, ``in``,
    ``update``, ``setdefault``, ``pop``, iteration, ``len`` and ``dict(state)``.
    """

    INPUT_FIELDS = INPUT_FIELDS

    def _row(self, key: object) -> dict[str, Any] | None:
        """The input row when ``key`` is an input field it holds."""
        if key in INPUT_FIELDS:
            row = dict.get(self, "input")
            if isinstance(row, dict) and key in row:
                return row
        return None

    def __getitem__(self, key: str) -> Any:
        row = self._row(key)
        return row[key] if row is not None else dict.__getitem__(self, key)

    def __setitem__(self, key: str, value: Any) -> None:
        row = self._row(key)
        if row is not None:
            row[key] = value
        else:
            dict.__setitem__(self, key, value)

    def __delitem__(self, key: str) -> None:
        row = self._row(key)
        if row is not None:
            del row[key]
        else:
            dict.__delitem__(self, key)

    def __contains__(self, key: object) -> bool:
        return self._row(key) is not None or dict.__contains__(self, key)

    def _forwarded(self) -> list[str]:
        row = dict.get(self, "input")
        if not isinstance(row, dict):
            return []
        return [k for k in INPUT_FIELDS if k in row and not dict.__contains__(self, k)]

    def __iter__(self) -> Any:
        yield from dict.__iter__(self)
        yield from self._forwarded()

    def __len__(self) -> int:
        return dict.__len__(self) + len(self._forwarded())

    def keys(self) -> Any:  # type: ignore[override]
        return list(self)

    def values(self) -> Any:  # type: ignore[override]
        return [self[k] for k in self]

    def items(self) -> Any:  # type: ignore[override]
        return [(k, self[k]) for k in self]

    def get(self, key: str, default: Any = None) -> Any:
        row = self._row(key)
        if row is not None:
            return row[key]
        return dict.get(self, key, default)

    def setdefault(self, key: str, default: Any = None) -> Any:
        if key not in self:
            self[key] = default
        return self[key]

    _MISSING = object()

    def pop(self, key: str, default: Any = _MISSING) -> Any:
        row = self._row(key)
        if row is not None:
            return row.pop(key)
        if default is State._MISSING:
            return dict.pop(self, key)
        return dict.pop(self, key, default)

    def update(self, other: Any = (), /, **kwargs: Any) -> None:  # type: ignore[override]
        pairs = other.items() if hasattr(other, "items") else other
        for key, value in pairs:
            self[key] = value
        for key, value in kwargs.items():
            self[key] = value

    def copy(self) -> State:
        return State(dict.items(self))

    def __copy__(self) -> State:
        return self.copy()

    def __reduce__(self) -> Any:
        # Rebuild from the raw storage so copies/pickles never duplicate forwarded fields.
        return (State, (), None, None, iter(list(dict.items(self))))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, dict):
            return dict(self.items()) == dict(other.items())
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"State({dict(self.items())!r})"


class AttrDict(dict):
    """A dict that also reads (and writes) its keys as attributes: the classic result shapes are
    TypedDicts (``res["reward"]``) and this SDK's are objects (``res.reward``); both work."""

    def __getattr__(self, name: str) -> Any:
        try:
            value = self[name]
        except KeyError:
            raise AttributeError(name) from None
        if isinstance(value, dict) and not isinstance(value, AttrDict | State):
            return AttrDict(value)
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        self[name] = value


class GenerateMetadata(AttrDict):
    """Metadata of a ``generate``/``evaluate`` run: the classic keys (``env_id``, ``model``,
    ``avg_reward``, ``avg_metrics``, ``time_ms``, ``path_to_save``...) and every field of
    ``verifiers.results.RunMetadata`` (``summary``, ``schema_version``, ...)."""


class GenerateOutputs(AttrDict):
    """Column-wise results of ``Environment.generate``/``evaluate`` (the classic field names)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for key in ("prompt", "completion", "answer", "state", "task", "info", "example_id"):
            self.setdefault(key, [])
        self.setdefault("reward", [])
        self.setdefault("metrics", {})
        self.setdefault("metadata", None)

    def __len__(self) -> int:
        return len(self["reward"])


class RolloutScore(AttrDict):
    """``{"reward": float, "metrics": {name: float}}`` for one rollout."""

    def __init__(self, reward: float = 0.0, metrics: dict[str, float] | None = None) -> None:
        super().__init__(reward=reward, metrics=dict(metrics or {}))


class RolloutScores(AttrDict):
    """``{"reward": [float], "metrics": {name: [float]}}`` for several rollouts."""

    def __init__(
        self, reward: list[float] | None = None, metrics: dict[str, list[float]] | None = None
    ) -> None:
        super().__init__(reward=list(reward or []), metrics=dict(metrics or {}))


class ProcessedOutputs(TypedDict):
    """Token-level training data for a batch of rollouts (classic trainer interface)."""

    prompt_ids: list[list[int]]
    prompt_mask: list[list[int]]
    completion_ids: list[list[int]]
    completion_mask: list[list[int]]
    completion_logprobs: list[list[float]]
    rewards: list[float]
    is_truncated: list[bool]


class Endpoint(TypedDict):
    key: str
    url: str
    model: str


Endpoints = dict[str, Endpoint]
JsonPrimitive = Literal["string", "number", "integer", "boolean", "array", "object"]
