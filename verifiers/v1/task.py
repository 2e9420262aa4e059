"""A task: its data (``TaskData``, frozen, the row a rollout solves and the part recorded on
the trace) and its behaviour (``Task``: setup, finalize, rewards and metrics).

``Task.score`` runs the task's ``@metric`` and ``@reward`` hooks, then the judges its
config plugs in (``TaskConfig.judges``), on a finished trace; a hook
names what it needs (``task``, ``trace``, ``runtime``), and one that needs a runtime is
skipped when scoring offline. Any failure inside is a ``TaskError``; the rewards and metrics
that were due stay on the trace as None.
"""

from __future__ import annotations

import copy
import functools
import inspect
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Self

from typing_extensions import TypeVar

from verifiers.v1.configs.task import TaskConfig
from verifiers.v1.errors import TaskError, attributed
from verifiers.v1.generics import concrete_type
from verifiers.v1.hooks import call_all, hooks_of, seed, unseed
from verifiers.v1.state import StateT
from verifiers.v1.task_data import (  # defined below the task's behaviour; kept here too
    Artifact as Artifact,
)
from verifiers.v1.task_data import (
    DataT as DataT,
)
from verifiers.v1.task_data import (
    TaskData as TaskData,
)
from verifiers.v1.task_data import (
    TaskResources as TaskResources,
)
from verifiers.v1.task_data import (
    TaskTimeout as TaskTimeout,
)
from verifiers.v1.task_data import (
    WireTaskData as WireTaskData,
)
from verifiers.v1.task_data import (
    task_key as task_key,
)
from verifiers.v1.utils.judges import load_judge

if TYPE_CHECKING:
    from verifiers.v1.trace import Trace

logger = logging.getLogger(__name__)


ConfigT = TypeVar("ConfigT", bound=TaskConfig, default=TaskConfig)


def _needs_runtime(fn: Callable[..., Any]) -> bool:
    return _takes_runtime(getattr(fn, "__func__", fn))


@functools.lru_cache(maxsize=1024)
def _takes_runtime(fn: Callable[..., Any]) -> bool:
    """Read once per function: ``inspect.signature`` on every hook of every rollout's scoring
    was a visible share of a v1 rollout's CPU (a bound method's parameters are its function's
    less ``self``, which is never ``runtime``)."""
    param = inspect.signature(fn).parameters.get("runtime")
    return param is not None and param.default is inspect.Parameter.empty


def scores_in_runtime(task: Any) -> bool:
    """Whether one of the task's metrics or rewards takes the rollout's ``runtime`` (runs a
    program there), so the rollout needs a box even when its harness runs in process."""
    return _class_scores_in_runtime(type(task), task)


_in_runtime: dict[type, bool] = {}


def _class_scores_in_runtime(cls: type, task: Any) -> bool:
    """``scores_in_runtime`` once per task class (its hooks are its class's methods)."""
    found = _in_runtime.get(cls)
    if found is None:
        if len(_in_runtime) >= 1024:  # classes made per call: stay bounded
            _in_runtime.clear()
        found = _in_runtime[cls] = any(
            _needs_runtime(fn) for kind in ("metric", "reward") for fn in hooks_of(task, kind)
        )
    return found


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
        entries = getattr(self.config, "judges", None)
        judges = [load_judge(entry) for entry in entries] if entries else []
        if runtime is None and judges:
            judges = [judge for judge in judges if not _needs_runtime(judge.score)]
        seed(trace.metrics, (fn.__name__ for fn in metrics))
        seed(trace.rewards, (fn.__name__ for fn in rewards))
        seed(trace.rewards, (judge.reward_name for judge in judges))
        try:  # what ``boundary`` does, without an async context manager per rollout
            await self._vf_run_scoring(trace, metrics, rewards, judges, available)
        except Exception as e:
            error = attributed(TaskError, f"task {type(self).__name__} scoring", e)
            if error is e:
                raise
            raise error from e

    async def _vf_run_scoring(
        self,
        trace: Trace,
        metrics: list[Callable[..., Any]],
        rewards: list[Callable[..., Any]],
        judges: list[Any],
        available: dict[str, Any],
    ) -> None:
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
        if not judges:
            return
        scores = await call_all([judge.score for judge in judges], available)
        for judge, value in zip(judges, scores, strict=True):
            if isinstance(value, Mapping):
                unseed(trace.rewards, judge.reward_name)
                for name, score in value.items():
                    trace.record_reward(name, score, judge.config.weight)
            else:
                trace.record_reward(judge.reward_name, value, judge.config.weight)

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
