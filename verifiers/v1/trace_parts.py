"""The pieces a trace records beside its message graph: who ran it (``AgentInfo``), on what
(``TraceTask``), in which run, each model call, rewards, errors and timing."""

from __future__ import annotations

import functools
import os
import time
from typing import Annotated, Any, Generic, Literal

from pydantic import BaseModel, Field
from typing_extensions import TypeVar

from verifiers.v1.configs.agent import AgentConfig
from verifiers.v1.configs.runtime import RuntimeInfo
from verifiers.v1.task_data import DataT
from verifiers.v1.types import FinishReason, Sampling, Usage

_IDS_PER_READ = 64
_ids: list[str] = []
"""Ids made from one ``os.urandom`` read and not handed out yet (``list.pop`` is atomic, so
threads never share one; a forked child starts without its parent's)."""
os.register_at_fork(after_in_child=_ids.clear)


def new_id() -> str:
    """A random id as ``uuid.uuid4().hex`` makes one (a version-4 UUID's 32 hex digits), without
    building the ``UUID`` object: an episode and each of its traces get one. The random bytes
    come from ``os.urandom`` as ``uuid4``'s do, read for ``_IDS_PER_READ`` ids at a time (a
    system call per id was a visible share of a v1 rollout's CPU)."""
    try:
        return _ids.pop()
    except IndexError:
        pass
    raw = bytearray(os.urandom(16 * _IDS_PER_READ))
    made = []
    for start in range(0, len(raw), 16):
        raw[start + 6] = (raw[start + 6] & 0x0F) | 0x40  # version 4
        raw[start + 8] = (raw[start + 8] & 0x3F) | 0x80  # the RFC 4122 variant
        made.append(raw[start : start + 16].hex())
    _ids.extend(made[1:])
    return made[0]


class TimeSpan(BaseModel):
    """Wall-clock start and end (epoch seconds); ``duration`` is derived, not stored."""

    start: float = 0.0
    end: float = 0.0

    @property
    def duration(self) -> float:
        return max(0.0, self.end - self.start) if self.end else 0.0


class TimeSplit(BaseModel):
    duration: float = 0.0
    """Seconds."""


class AgentSpan(TimeSpan):
    """The agent's run, split into time waiting on the model and time in the harness."""

    model: TimeSplit = Field(default_factory=TimeSplit)
    harness: TimeSplit = Field(default_factory=TimeSplit)


class Timing(BaseModel):
    start: float = Field(default_factory=time.time)
    boot: TimeSpan = Field(default_factory=TimeSpan)
    setup: TimeSpan = Field(default_factory=TimeSpan)
    agent: AgentSpan = Field(default_factory=AgentSpan)
    finalize: TimeSpan = Field(default_factory=TimeSpan)
    scoring: TimeSpan = Field(default_factory=TimeSpan)


class Error(BaseModel):
    """A captured failure: its class name, message, HTTP status when a provider gave one."""

    type: str
    message: str
    status_code: int | None = None
    traceback: str | None = None


class VersionInfo(BaseModel):
    version: str
    commit: str | None = None


@functools.cache
def current_version() -> VersionInfo:
    """The SDK release, one record for every trace of the process (a record per trace was
    two more objects each in-flight rollout held for the collector to walk)."""
    from verifiers import __version__

    return VersionInfo(version=__version__)


AgentConfigT = TypeVar("AgentConfigT", bound=AgentConfig, default=AgentConfig)


class AgentInfo(BaseModel, Generic[AgentConfigT]):
    config: AgentConfigT
    """The resolved config that rebuilds the agent."""
    runtime: RuntimeInfo | None = None
    """The box it ran in (None until one was provisioned)."""
    name: str = "agent"
    """The env's role the agent played."""
    trainable: bool = True
    """Whether its tokens train the run's policy."""


class TraceTask(BaseModel, Generic[DataT]):
    type: str
    """The task class's name."""
    data: DataT


def trace_task(task: Any) -> TraceTask[Any]:
    """``task``'s record on its episodes and traces (class name and data), made once per
    task and shared by them: the data is frozen, and a record per episode and per trace was
    a v1 rollout's objects that every garbage collection of a run walked. A copy of the
    task with other data (``with_system_prompt``) gets its own."""
    cached = getattr(task, "_vf_trace_task", None)
    if cached is not None and cached.data is task.data and cached.type == type(task).__name__:
        return cached
    record: TraceTask[Any] = TraceTask(type=type(task).__name__, data=task.data)
    try:
        task._vf_trace_task = record
    except AttributeError:  # a task class with slots: a record each time
        pass
    return record


class Reward(BaseModel):
    score: float
    weight: float = 1.0

    @property
    def value(self) -> float:
        return self.score * self.weight


class EvalRunInfo(BaseModel):
    type: Literal["eval"] = "eval"
    id: str
    step: int | None = None


class TrainRunInfo(BaseModel):
    type: Literal["train"] = "train"
    id: str
    step: int | None = None


RunInfo = Annotated[EvalRunInfo | TrainRunInfo, Field(discriminator="type")]


class ModelCall(BaseModel):
    """One model call of a rollout."""

    node: int | None = None
    """The index in ``Trace.nodes`` of the reply it committed."""
    model: str | None = None
    sampling: Sampling | None = None
    endpoint: str | None = None
    """The provider path it went to (``/chat/completions``)."""
    finish_reason: FinishReason = None
    usage: Usage | None = None
    time: TimeSpan = Field(default_factory=TimeSpan)
    error: Error | None = None
    policy_version: int | None = Field(default=None, exclude=True)
    """The served policy's version when the server reports one (vf-serve does), what a
    trainer counts staleness by; never saved (not in upstream's record)."""
