"""A taskset: a config in, tasks out. ``load()`` yields the tasks (a generator may be
endless: ``INFINITE = True``); ``head(n)`` and ``shuffle(seed)`` are views that read
lazily and never change the taskset they came from.

A taskset yields one task type, read off its generic parameters (``Taskset[MyTask, MyConfig]``).
"""

from __future__ import annotations

import copy
import itertools
import random
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Generic, Self

from typing_extensions import TypeVar

from verifiers.v1.configs.taskset import TasksetConfig
from verifiers.v1.generics import concrete_type
from verifiers.v1.task import Task, TaskT

DEFAULT_SEED = 0
"""The seed of ``shuffle()`` without one, so a shuffled run samples the same tasks each time."""

TasksetConfigT = TypeVar("TasksetConfigT", bound=TasksetConfig, default=TasksetConfig)
Transform = Callable[[Iterator[Any]], Iterator[Any]]


class Taskset(ABC, Generic[TaskT, TasksetConfigT]):
    INFINITE: bool = False
    """Whether ``load()`` never ends; a ``head(n)`` view is finite whatever its class says."""

    def __init__(self, config: TasksetConfigT) -> None:
        self.config = config
        path = config.system_prompt
        self.system_prompt: str | None = path.read_text() if path is not None else None
        self._transform: Transform | None = None

    @abstractmethod
    def load(self) -> Iterable[TaskT]:
        """Build and yield the tasks."""

    def __iter__(self) -> Iterator[TaskT]:
        tasks: Iterator[TaskT] = iter(self.load())
        if self.system_prompt is not None:
            prompt = self.system_prompt
            tasks = (task.with_system_prompt(prompt) for task in tasks)
        yield from self._transform(tasks) if self._transform is not None else tasks

    def _view(self, transform: Transform) -> Self:
        clone = copy.copy(self)
        before = self._transform
        clone._transform = transform if before is None else (lambda ts: transform(before(ts)))
        return clone

    def head(self, num_tasks: int) -> Self:
        """The first ``num_tasks`` tasks, built only as they are read."""
        view = self._view(lambda tasks: itertools.islice(tasks, num_tasks))
        view.INFINITE = False
        return view

    def shuffle(self, seed: int | None = None) -> Self:
        """All tasks in a random order fixed by ``seed`` (``DEFAULT_SEED`` when None). An
        endless taskset cannot be shuffled: bound it first (``head(n).shuffle()``)."""
        if self.INFINITE:
            raise ValueError(
                f"{type(self).__name__} is infinite and cannot be shuffled; "
                "bound it first with head(num_tasks)"
            )
        rng_seed = DEFAULT_SEED if seed is None else seed

        def shuffled(tasks: Iterator[Any]) -> Iterator[Any]:
            items = list(tasks)
            random.Random(rng_seed).shuffle(items)
            return iter(items)

        return self._view(shuffled)

    @classmethod
    def task_type(cls) -> type[Task]:
        return concrete_type(cls, Task, origin=Taskset) or Task

    @classmethod
    def toolsets(cls, config: TasksetConfigT) -> list[Any]:
        """Tool servers shared by all of the taskset's rollouts (none by default)."""
        return []
