"""The sandbox interface: what a provider (local, or a remote service) must offer.

A ``Sandbox`` runs Python snippets or shell commands in an isolated place with limits, holds
files, and is destroyed when the rollout ends. Providers are async and pool sandboxes so a
rollout never waits for one to boot.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Literal

from pydantic import BaseModel, Field

from verifiers import errors

IsolationMode = Literal["bwrap", "landlock", "unsafe"]


class SandboxLimits(BaseModel):
    """Per-sandbox limits. Wall and CPU time are per snippet; the rest hold for the sandbox."""

    wall_time_s: float = Field(default=10.0, gt=0)
    cpu_time_s: int = Field(default=10, gt=0)
    memory_mb: int = Field(default=512, ge=64)
    max_processes: int = Field(default=64, ge=4)
    max_file_size_mb: int = Field(default=64, ge=1)
    max_open_files: int = Field(default=256, ge=16)
    max_output_bytes: int = Field(default=1 << 20, ge=1024)
    network: bool = False
    # Disk for the sandbox's work dir and /tmp together... each a size- and inode-limited tmpfs
    # where one can be mounted (as root); elsewhere only max_file_size_mb holds.
    disk_mb: int = Field(default=256, ge=1)
    max_files: int = Field(default=10_000, ge=16)
    # Importable beyond the standard library (module names, e.g. ["numpy", "sympy"]); nothing
    # else installed on the host is visible inside.
    packages: list[str] = Field(default_factory=list)
    # Host directories the sandbox reads (never writes) at their own path, e.g. the dependency
    # environments of scripts prepared for it (``verifiers.v1.runtimes.uv_scripts``): bound
    # read-only under bwrap, read-only Landlock rules otherwise. What is added to one later
    # is visible inside, so a sandbox started before a script was prepared can run it.
    read_only_dirs: list[str] = Field(default_factory=list)


class ExecResult(BaseModel):
    stdout: str = ""
    stderr: str = ""
    exit_code: int = 0
    timed_out: bool = False
    duration_ms: float = 0.0
    swept: int = 0  # leftover processes killed after the snippet

    @property
    def output(self) -> str:
        """stdout and stderr as a model should see them."""
        parts = [self.stdout]
        if self.stderr:
            parts.append(self.stderr)
        if self.timed_out:
            parts.append("[timed out: the snippet was killed]")
        return "\n".join(p for p in parts if p).strip() or "(no output)"


# The sandbox itself failed (crashed, could not start): the SDK's own error, recorded on the rollout.
SandboxError = errors.SandboxError


class SandboxUnavailableError(SandboxError):
    """This machine cannot give the isolation asked for; the message says what to install."""


class Sandbox(ABC):
    """``run_python`` and ``run_shell`` run a fresh snippet each: a grader's way, whatever ran
    before (nothing a REPL left running can reach it). ``run_repl`` runs the model's code in its
    persistent REPL, whose own code can shape what comes back: the model's tool, never a grader.
    """

    mode: IsolationMode

    @abstractmethod
    async def run_python(self, code: str, timeout: float | None = None) -> ExecResult: ...

    @abstractmethod
    async def run_repl(self, code: str, timeout: float | None = None) -> ExecResult: ...

    @abstractmethod
    async def reset_repl(self) -> None: ...

    @abstractmethod
    async def run_shell(self, command: str, timeout: float | None = None) -> ExecResult: ...

    @abstractmethod
    async def upload(self, path: str, data: bytes) -> None: ...

    @abstractmethod
    async def download(self, path: str) -> bytes: ...

    @abstractmethod
    async def destroy(self) -> None: ...

    async def __aenter__(self) -> Sandbox:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.destroy()


class SandboxProvider(ABC):
    mode: IsolationMode

    @abstractmethod
    async def create(self, limits: SandboxLimits | None = None) -> Sandbox: ...

    @abstractmethod
    async def close(self) -> None:
        """Destroy every sandbox this provider made, pooled or in use."""
