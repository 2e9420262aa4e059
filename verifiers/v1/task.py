"""A task: its data (``TaskData``, frozen, the row a rollout solves and the part recorded on
the trace) and its behaviour (``Task``: setup, finalize, rewards and metrics).

``Task.score`` runs the task's ``@metric`` and ``@reward`` hooks on a finished trace; a hook
names what it needs (``task``, ``trace``, ``runtime``), and one that needs a runtime is
skipped when scoring offline. Any failure inside is a ``TaskError``; the rewards and metrics
that were due stay on the trace as None.
"""

from __future__ import annotations

import copy
import hashlib
import inspect
import json
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Self

from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import TypeVar

from verifiers.v1.configs.task import TaskConfig
from verifiers.v1.errors import TaskError, boundary
from verifiers.v1.generics import concrete_type
from verifiers.v1.hooks import call_all, hooks_of, seed, unseed
from verifiers.v1.state import StateT
from verifiers.v1.types import Messages, content_text

if TYPE_CHECKING:
    from verifiers.v1.trace import Trace

logger = logging.getLogger(__name__)


class TaskResources(BaseModel):
    """Resources a task's box needs (None: the runtime's default)."""

    model_config = ConfigDict(frozen=True)

    cpu: float | None = None
    memory: float | None = None
    """GB."""
    gpu: str | None = None
    """``TYPE`` or ``TYPE:COUNT``, e.g. ``A100:2``."""
    disk: float | None = None
    """GB."""


class TaskTimeout(BaseModel):
    """Per-task limits in seconds, over the agent's own (None: the agent's)."""

    model_config = ConfigDict(frozen=True)

    setup: float | None = None
    agent: float | None = None
    finalize: float | None = None
    scoring: float | None = None


class Artifact(BaseModel):
    """A path collected from one runtime and restored at the same place in another."""

    model_config = ConfigDict(frozen=True)

    path: str
    optional: bool = False


class TaskData(BaseModel):
    model_config = ConfigDict(frozen=True)

    idx: int | None = None
    """The row's index in its taskset (set by the taskset)."""
    name: str | None = None
    description: str | None = None
    prompt: str | Messages | None = None
    """The opening user prompt (None: the user speaks first)."""
    system_prompt: str | None = None
    image: str | None = None
    """A container image, for tasks that run in one."""
    workdir: str | None = None
    network_allow: list[str] = Field(default_factory=lambda: ["*"])
    """Destinations the task needs (``*``: whatever the runtime allows)."""
    network_block: list[str] = Field(default_factory=list)
    artifacts: list[Artifact] = Field(default_factory=list)
    timeout: TaskTimeout = TaskTimeout()
    resources: TaskResources = TaskResources()

    @property
    def prompt_text(self) -> str:
        """The prompt's text (a message list's texts joined by blank lines)."""
        if isinstance(self.prompt, str):
            return self.prompt
        texts = [content_text(m.content) for m in self.prompt or []]
        return "\n\n".join(t for t in texts if t)


class WireTaskData(TaskData):
    """Task data read without its taskset's class: the taskset's own fields are kept as
    extras (``model_extra``)."""

    model_config = ConfigDict(extra="allow")


def task_key(data: TaskData | Mapping[str, Any]) -> str:
    """A task's identity by content: the sha256 of its JSON data (None fields left out, keys
    sorted), the same in every process and after a round trip through a results file."""
    if isinstance(data, BaseModel):
        data = data.model_dump(mode="json", exclude_none=True)
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


DataT = TypeVar("DataT", bound=TaskData)
ConfigT = TypeVar("ConfigT", bound=TaskConfig, default=TaskConfig)


def _needs_runtime(fn: Callable[..., Any]) -> bool:
    param = inspect.signature(fn).parameters.get("runtime")
    return param is not None and param.default is inspect.Parameter.empty


class Task(Generic[DataT, StateT, ConfigT]):
    NEEDS_CONTAINER: ClassVar[bool] = False
    """Whether the task needs an isolated filesystem (a container runtime)."""

    def __init__(self, data: DataT, config: ConfigT | None = None) -> None:
        self.data = data
        self.config: ConfigT = config if config is not None else self.config_type()()  # type: ignore[assignment]  # config_type() is ConfigT's class, read off the generic parameters

    def with_system_prompt(self, system_prompt: str) -> Self:
        """A copy of this task whose data carries ``system_prompt``."""
        clone = copy.copy(self)
        clone.data = self.data.model_copy(update={"system_prompt": system_prompt})
        return clone

    async def setup(self, trace: Trace, runtime: Any) -> None:
        """Prepare the runtime before the agent starts (files, services)."""

    async def finalize(self, trace: Trace, runtime: Any) -> None:
        """Collect what scoring needs from the runtime after the agent stops."""

    async def validate(self, runtime: Any) -> bool:
        """Whether the task is solvable in ``runtime`` (a taskset check, not a rollout's)."""
        return True

    async def score(self, trace: Trace, runtime: Any | None = None) -> None:
        """Run the metrics, then the rewards, recording them on ``trace``."""
        metrics = hooks_of(self, "metric")
        rewards = hooks_of(self, "reward")
        available: dict[str, Any] = {"task": self.data, "trace": trace}
        if runtime is None:
            skipped = [fn.__name__ for fn in (*metrics, *rewards) if _needs_runtime(fn)]
            if skipped:
                logger.info("scoring without a runtime skips %s", skipped)
            metrics = [fn for fn in metrics if not _needs_runtime(fn)]
            rewards = [fn for fn in rewards if not _needs_runtime(fn)]
        else:
            available["runtime"] = runtime
        seed(trace.metrics, (fn.__name__ for fn in metrics))
        seed(trace.rewards, (fn.__name__ for fn in rewards))
        async with boundary(TaskError, f"task {type(self).__name__} scoring"):
            for fn, value in zip(metrics, await call_all(metrics, available), strict=True):
                if isinstance(value, Mapping):
                    unseed(trace.metrics, fn.__name__)
                    trace.record_metrics(value)
                else:
                    trace.record_metric(fn.__name__, value)
            for fn, value in zip(rewards, await call_all(rewards, available), strict=True):
                weight = getattr(fn, "_vf_weight", 1.0)
                if isinstance(value, Mapping):
                    unseed(trace.rewards, fn.__name__)
                    for name, score in value.items():
                        trace.record_reward(name, score, weight)
                else:
                    trace.record_reward(fn.__name__, value, weight)

    @classmethod
    def data_type(cls) -> type[TaskData]:
        return concrete_type(cls, TaskData) or TaskData

    @classmethod
    def config_type(cls) -> type[TaskConfig]:
        return concrete_type(cls, TaskConfig) or TaskConfig

    @classmethod
    def toolsets(cls, config: ConfigT) -> list[Any]:
        """The tool servers launched for each rollout of this task (none by default)."""
        return []


TaskT = TypeVar("TaskT", bound=Task)
