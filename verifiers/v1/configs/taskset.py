"""A taskset's config (``--env.taskset.*``): which plugin, which rows, and the knobs passed
to each task."""

from __future__ import annotations

from pathlib import Path

from pydantic import ConfigDict, SerializeAsAny

from verifiers.v1.configs.base import BaseConfig
from verifiers.v1.configs.task import TaskConfig, WireTaskConfig
from verifiers.v1.types import ID


class TasksetConfig(BaseConfig):
    id: ID = ""
    """The taskset plugin: a local package or a hub ``owner/name[@version]``."""
    task: SerializeAsAny[TaskConfig] = TaskConfig()
    """The config each task is built with (``--env.taskset.task.*``)."""
    system_prompt: Path | None = None
    """A file whose text replaces every task's system prompt as the taskset is read."""

    @property
    def name(self) -> str:
        """The plugin's name without owner or version (``owner/gsm8k-v1@1.0`` → ``gsm8k-v1``)."""
        return self.id.split("@", 1)[0].rsplit("/", 1)[-1]


class WireTasksetConfig(TasksetConfig):
    """A taskset config read without its plugin installed: its own knobs are kept as extras
    and checked against the plugin's config when the taskset is loaded."""

    model_config = ConfigDict(extra="allow")
    task: SerializeAsAny[WireTaskConfig] = WireTaskConfig()
