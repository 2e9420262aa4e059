"""A task's data (``TaskData``, frozen: the row a rollout solves and the part recorded on the
trace), its resources and artifacts, and its identity by content (``task_key``): what traces,
episodes and tasks share, below the task's behaviour (``verifiers.v1.task``)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import TypeVar

from verifiers.v1.types import Messages, content_text


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
    """A path collected from one runtime and restored at the same place in another (upstream
    v0.3.0's fields)."""

    model_config = ConfigDict(frozen=True)

    source: str
    exclude: list[str] = Field(default_factory=list)
    """``tar --exclude`` patterns, applied when ``source`` is a directory."""
    required: bool = True


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
