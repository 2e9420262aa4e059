"""The pieces a trace records beside its message graph: who ran it (``AgentInfo``), on what
(``TraceTask``), in which run, each model call, rewards, errors and timing."""

from __future__ import annotations

import time
from typing import Annotated, Generic, Literal

from pydantic import BaseModel, Field
from typing_extensions import TypeVar

from verifiers.v1.configs.agent import AgentConfig
from verifiers.v1.configs.runtime import RuntimeInfo
from verifiers.v1.task_data import DataT
from verifiers.v1.types import FinishReason, Sampling, Usage


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


def current_version() -> VersionInfo:
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
