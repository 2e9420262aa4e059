"""Which program plays an agent's seat (``--env.agent.harness.*``) and its knobs; a harness
plugin subclasses ``HarnessConfig`` for its own."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import ConfigDict, Field, FiniteFloat

from verifiers.v1.configs.base import BaseConfig
from verifiers.v1.types import ID


class HarnessConfig(BaseConfig):
    id: ID = "bash"
    """The harness plugin: a built-in name, a local package or a hub ``owner/name``."""
    env: dict[str, str] = Field(default_factory=dict)
    """Extra environment variables for the program (the harness's own win)."""
    forward_env: list[str] = Field(default_factory=list)
    """Host variables passed through by name (``env`` wins)."""
    tool_timeout: FiniteFloat = Field(600.0, gt=0)
    """Seconds one tool call may take."""
    disabled_tools: list[str] | None = None
    skills: list[Path] = Field(default_factory=list)
    """Skill folders uploaded where the program discovers skills."""

    @property
    def resolved_env(self) -> dict[str, str]:
        forwarded = {k: os.environ[k] for k in self.forward_env if k in os.environ}
        return {**forwarded, **self.env}


class WireHarnessConfig(HarnessConfig):
    """A harness config read without its plugin: its own knobs are kept as extras."""

    model_config = ConfigDict(extra="allow")


class NullHarnessConfig(HarnessConfig):
    """The ``null`` harness: a plain chat loop run in-process (no program, no runtime); it
    calls the taskset's Python tools until a reply asks for none."""

    id: ID = "null"


class BashHarnessConfig(HarnessConfig):
    id: ID = "bash"
    edit: bool = True
    """Offer the ``edit`` tool beside ``bash`` (``--env.agent.harness.edit false``: bash only)."""
    search: bool = False
    """Upstream's web search tool (serper.dev); refused here: the sandbox has no network."""
    max_output_chars: int = Field(30_000, ge=100)
    """What the model sees of one command's output, at most (the head and the tail kept)."""
    memory_mb: int = Field(1024, ge=64)
    """The sandbox's memory limit."""
    disk_mb: int = Field(512, ge=1)
    """The sandbox's work dir and /tmp, together."""
