"""Run-time knobs of a task (``--env.taskset.task.*``), read by ``Task`` code while it sets
up and scores; load-time choices (which rows) belong on ``TasksetConfig``."""

from __future__ import annotations

from pydantic import ConfigDict

from verifiers.v1.configs.base import BaseConfig


class TaskConfig(BaseConfig):
    """Subclass it for a task's own knobs; every field needs a default, since a task built
    without a config builds its declared config type."""


class WireTaskConfig(TaskConfig):
    """A task config read without its taskset's plugin: the task's knobs kept as extras."""

    model_config = ConfigDict(extra="allow")
