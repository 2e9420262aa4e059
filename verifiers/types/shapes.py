"""The shapes the classic API exchanges: messages, rollout state, trajectory steps, scores
(generate outputs are ``verifiers.types.outputs``, the client settings ``client_config``).

Two eras of the classic API share these names. Environments of verifiers 0.1.x before 0.1.11
exchange messages as plain dicts in the OpenAI wire shape (``ChatMessage``); those of 0.1.11 to
0.3.x exchange typed messages (``UserMessage``, ``AssistantMessage``..., defined in
``verifiers.messages`` and re-exported here), which also index like those dicts.
``verifiers.classic`` decides which an environment gets. Anything that leaves the process
(results files, the hub) is described by the pydantic models in ``verifiers.results.schema``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Literal, NotRequired, TypeAlias, TypedDict

from verifiers.classic.error_data import ErrorData as ErrorData  # re-exported: its classic path
from verifiers.messages.models import (  # re-exported: the classic module path of these types
    AssistantMessage,
    ContentPart,
    FinishReason,
    GenericContentPart,
    ImageUrlContentPart,
    ImageUrlSource,
    InputAudioContentPart,
    InputAudioSource,
    Message,
    MessageContent,
    Response,
    ResponseMessage,
    ResponseTokens,
    RolloutTiming,
    SystemMessage,
    TextContentPart,
    TextMessage,
    TimeSpan,
    TimeSpans,
    Tool,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
)
from verifiers.messages.models import MessageModel as CustomBaseModel

if TYPE_CHECKING:
    from datasets import Dataset


MessageType = Literal["chat", "completion"]


class ChatMessage(TypedDict, total=False):
    """A message of the dict era (verifiers 0.1.x before 0.1.11): OpenAI's wire shape."""

    role: str
    content: Any
    name: str
    tool_calls: list[dict[str, Any]]
    tool_call_id: str
    reasoning_content: str


ChatMessages = list[ChatMessage]
Messages: TypeAlias = "list[Message] | list[ChatMessage] | str"
Info = dict[str, Any]
SamplingArgs = dict[str, Any]
IndividualRewardFunc = Callable[..., float | Awaitable[float]]
RewardFunc = Callable[..., float | Awaitable[float]]
GroupRewardFunc = Callable[..., list[float] | Awaitable[list[float]]]
DatasetBuilder: TypeAlias = "Callable[[], Dataset]"
ToolLike: TypeAlias = "str | Tool | Callable[..., object]"


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
    routed_experts: Any
    multi_modal_data: Any
    prompt_attribution: dict[str, Any]  # which prompt message each prompt token came from


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


class RolloutInput(BaseRolloutInput, total=False):
    answer: str
    info: Info | str
    task: Any


class TokenUsage(TypedDict):
    input_tokens: float
    output_tokens: float
    final_input_tokens: NotRequired[float]
    final_output_tokens: NotRequired[float]


class VersionInfo(TypedDict):
    vf_version: str
    vf_commit: str | None
    env_version: str | None
    env_commit: str | None


class RolloutOutput(dict):
    """One rollout as verifiers 0.1.11+ returns it in ``results["outputs"]``: JSON-ready fields
    (``example_id``, ``prompt``, ``completion``, ``answer``, ``info``, ``reward``, ``metrics``,
    ``timing``, ``is_completed``, ``is_truncated``, ``stop_condition``, ``error``, ``tool_defs``,
    ``token_usage``) plus any requested state columns."""


INPUT_FIELDS = ("prompt", "answer", "task", "info", "example_id")
_INPUT_KEYS = frozenset(INPUT_FIELDS)  # membership in one hash look-up: ``get`` is that hot
TASK_INPUT_FIELDS = frozenset({"prompt", "answer", "info", "example_id"})


class State(dict):
    """Mutable per-rollout state; the dataset row lives once, in ``state["input"]``.

    Input fields (``prompt``, ``answer``, ``task``, ``info``, ``example_id``) present in the row
    read and write through to it, and every path agrees: ``state[k]``, ``get``, ``in``,
    ``update``, ``setdefault``, ``pop``, iteration, ``len`` and ``dict(state)``.
    """

    INPUT_FIELDS = INPUT_FIELDS

    def _row(self, key: object) -> dict[str, Any] | None:
        """The input row when ``key`` is an input field it holds."""
        if key in _INPUT_KEYS:
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

    def keys(self) -> Any:
        return list(self)

    def values(self) -> Any:
        return [self[k] for k in self]

    def items(self) -> Any:
        return [(k, self[k]) for k in self]

    def get(self, key: str, default: Any = None) -> Any:
        if key in _INPUT_KEYS:  # ``_row``, inlined: a rollout reads its state this way ~40 times
            row = dict.get(self, "input")
            if isinstance(row, dict) and key in row:
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

    def update(self, other: Any = (), /, **kwargs: Any) -> None:
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

    __hash__ = None

    def __repr__(self) -> str:
        return f"State({dict(self.items())!r})"

    def add_step_reward(self, reward: float | None) -> None:
        """Add ``reward`` to the last trajectory step's (an intermediate, per-turn reward)."""
        if reward is None:
            return
        if isinstance(reward, bool) or not isinstance(reward, int | float):
            raise TypeError("State.add_step_reward requires a numeric reward.")
        trajectory = self.get("trajectory")
        if not trajectory:
            raise RuntimeError("State.add_step_reward requires a trajectory step.")
        step = trajectory[-1]
        step["reward"] = float(step.get("reward") or 0.0) + float(reward)

    def total_step_reward(self) -> float:
        return sum(float(step.get("reward") or 0.0) for step in self.get("trajectory") or [])

    def assert_serializable(self) -> None:
        """Raise ``TypeError`` unless the state can be saved: JSON, plus what the trainer's
        transport carries besides (buffers, arrays, dataclasses, pydantic models)."""
        import json

        try:
            json.dumps(dict(self.items()), default=_serializable_stand_in)
        except TypeError as exc:
            raise TypeError("Task and State values must be JSON-serializable.") from exc


def _serializable_stand_in(obj: Any) -> Any:
    import dataclasses
    import enum
    import sys
    from datetime import date, datetime
    from pathlib import Path

    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, datetime | date):
        return obj.isoformat()
    if isinstance(obj, bytes | bytearray | memoryview):
        return f"<{type(obj).__name__}>"
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(obj, numpy.generic):
        return obj.item()
    if numpy is not None and isinstance(obj, numpy.ndarray):
        return {"dtype": str(obj.dtype), "shape": list(obj.shape)}
    if hasattr(obj, "model_dump"):
        return obj.model_dump(exclude_none=True)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    raise TypeError(f"{type(obj).__name__} is not JSON-serializable")


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


JsonPrimitive = Literal["string", "number", "integer", "boolean", "array", "object"]
