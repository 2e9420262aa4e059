"""Where a harness program runs (``--env.agent.runtime``): the runtime kinds a config may
name, told apart by ``type``, and the record of the box a rollout ran in."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field

from verifiers.v1.configs.base import BaseConfig


class NetworkPolicyConfig(BaseConfig):
    allow: list[str] = Field(default_factory=lambda: ["*"])
    """Destinations the program may reach (``*``: any)."""
    block: list[str] = Field(default_factory=list)
    """Destinations refused even when allowed."""


class SubprocessConfig(BaseConfig):
    """A child process on this machine (this SDK confines it with its sandbox)."""

    type: Literal["subprocess"] = "subprocess"


class DockerConfig(NetworkPolicyConfig):
    type: Literal["docker"] = "docker"
    image: str = "python:3.11-slim"
    workdir: str = "/app"
    cpu: float | None = None
    memory: float | None = None
    """Memory in GB."""
    gpu: str | None = None
    disk: float | None = None
    """Disk in GB."""


class PrimeConfig(NetworkPolicyConfig):
    """A Prime Intellect sandbox (a remote service; not run by this SDK)."""

    type: Literal["prime"] = "prime"
    image: str = "python:3.11-slim"
    workdir: str = "/app"
    vm: bool = False
    guaranteed: bool = False
    region: str | None = None
    labels: list[str] = Field(default_factory=list)
    cpu: float = 1.0
    memory: float = 2.0
    gpu: str | None = None
    disk: float = 5.0
    idle_timeout: float | None = 3600
    creates_per_min: int | None = None


class ModalConfig(BaseConfig):
    """A Modal sandbox (a remote service; not run by this SDK)."""

    type: Literal["modal"] = "modal"
    image: str = "python:3.11-slim"
    workdir: str = "/app"
    network_access: bool = True
    region: str | None = None
    cpu: float = 1.0
    memory: float = 2.0
    gpu: str | None = None
    disk: float = 5.0
    creates_per_sec: float | None = 40.0


RuntimeConfig = Annotated[
    SubprocessConfig | DockerConfig | PrimeConfig | ModalConfig, Field(discriminator="type")
]


class RuntimeInfo(BaseConfig):
    """The box a rollout ran in, as recorded on its trace: the runtime config's fields plus
    the box's ``id``; kept loose so a record from any runtime kind reads back."""

    model_config = ConfigDict(extra="allow")

    type: str = "subprocess"
    id: str | None = None
    borrowed: bool = False
