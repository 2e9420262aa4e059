"""The runtime interface a harness and a task's hooks see (upstream's ``Runtime``, as far as
this SDK's harnesses need it), and ``open_runtime``: the box a config names, started."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING

from verifiers.v1.errors import HarnessError

if TYPE_CHECKING:
    from verifiers.v1.configs.runtime import RuntimeConfig, RuntimeInfo

MISSING_RUNTIMES = {
    "docker": "a container engine",
    "prime": "Prime Intellect's remote sandboxes",
    "modal": "Modal's remote sandboxes",
}
"""What each runtime kind this SDK does not run would need."""


@dataclass(frozen=True)
class ProgramResult:
    exit_code: int
    stdout: str
    stderr: str


class Runtime(ABC):
    """One rollout's box: started before the task's setup, stopped when the rollout ends."""

    config: RuntimeConfig

    @property
    def type(self) -> str:
        return self.config.type

    @abstractmethod
    async def start(self) -> None: ...

    @abstractmethod
    async def stop(self) -> None:
        """Free the box (idempotent; completes even when the rollout is being cancelled)."""

    @abstractmethod
    async def run(
        self, argv: list[str], env: dict[str, str], timeout: float | None = None
    ) -> ProgramResult: ...

    @abstractmethod
    async def read(self, path: str, max_bytes: int | None = None) -> bytes:
        """The file at ``path`` (relative to the box's work dir); ``SandboxError`` when it
        cannot be read or is over ``max_bytes``."""

    @abstractmethod
    async def write(self, path: str, data: bytes) -> None: ...

    @abstractmethod
    async def prepare_uv_script(
        self, script: str | bytes, env: dict[str, str] | None = None, *, activate: bool = True
    ) -> list[str]:
        """The argv that runs a PEP 723 script (its dependencies made available) in the box."""

    @abstractmethod
    async def run_uv_script(
        self,
        script: str | bytes,
        args: list[str] | None = None,
        env: dict[str, str] | None = None,
    ) -> ProgramResult:
        """Run a PEP 723 script with ``args`` in the box."""

    @abstractmethod
    def info(self) -> RuntimeInfo:
        """The record of this box on the trace."""


def check_runtime(config: RuntimeConfig) -> None:
    """Refuse a runtime kind this SDK does not run, naming what it would need."""
    if config.type != "subprocess":
        need = MISSING_RUNTIMES.get(config.type, "a runtime this SDK does not have")
        raise HarnessError(
            f"runtime {config.type!r} needs {need}, which this SDK does not run; the null and "
            "bash harnesses run in runtime 'subprocess' (a confined local sandbox): set "
            "--env.agent.runtime.type subprocess"
        )
