"""Run-time knobs of a task (``--env.taskset.task.*``), read by ``Task`` code while it sets
up and scores; load-time choices (which rows) belong on ``TasksetConfig``. Every task config
carries ``judges``: judge plugins ``Task.score`` runs after the task's own rewards."""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field, model_validator

from verifiers.v1.configs.base import BaseConfig
from verifiers.v1.configs.judge import Judges, check_judges, resolve_judges


class TaskConfig(BaseConfig):
    """Subclass it for a task's own knobs; every field needs a default, since a task built
    without a config builds its declared config type."""

    judges: Judges = Field(default_factory=list)
    """Judge plugins scored after the task's rewards, each under its own reward key."""

    @model_validator(mode="before")
    @classmethod
    def _read_judges(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("judges"):
            from verifiers.v1.utils.judges import judge_config_type

            data = {**data, "judges": resolve_judges(data["judges"], judge_config_type)}
        return data

    @model_validator(mode="after")
    def _check_judges(self) -> TaskConfig:
        check_judges(self.judges)
        return self


class WireTaskConfig(TaskConfig):
    """A task config read without its taskset's plugin: the task's knobs kept as extras."""

    model_config = ConfigDict(extra="allow")
