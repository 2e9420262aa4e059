"""The ``subprocess`` runtime: one confined sandbox of ``verifiers.sandbox`` per rollout, with
the isolation the machine offers (bwrap, else Landlock; never unconfined). Commands run in
its work dir (files persist between them, the shell does not); a file path is read and written
beneath that dir. A sandbox that cannot start, crashes or stops answering raises the v1
``SandboxError``, which ends that rollout only."""

from __future__ import annotations

import asyncio
import shlex
from collections.abc import Awaitable, Callable
from typing import TypeVar

from verifiers import errors
from verifiers.sandbox import ExecResult, LocalSandbox, SandboxLimits, probe_mode
from verifiers.v1.configs.runtime import RuntimeInfo, SubprocessConfig
from verifiers.v1.errors import SandboxError
from verifiers.v1.runtimes.base import ProgramResult, Runtime

T = TypeVar("T")


class SubprocessRuntime(Runtime):
    def __init__(self, config: SubprocessConfig, limits: SandboxLimits) -> None:
        self.config = config
        self.limits = limits
        self.sandbox: LocalSandbox | None = None
        self.mode: str | None = None

    async def guarded(self, what: str, action: Callable[[LocalSandbox], Awaitable[T]]) -> T:
        """``action`` on the live sandbox; the sandbox's own failure becomes the v1 kind."""
        if self.sandbox is None:
            raise SandboxError(f"{what}: the rollout's sandbox is not running")
        try:
            return await action(self.sandbox)
        except errors.SandboxError as e:
            raise SandboxError(f"{what}: {e}") from e

    async def start(self) -> None:
        try:
            self.mode = probe_mode()
            self.sandbox = await LocalSandbox(self.mode, self.limits).start()
        except (errors.SandboxError, OSError) as e:
            raise SandboxError(f"the subprocess runtime's sandbox did not start: {e}") from e

    async def stop(self) -> None:
        box, self.sandbox = self.sandbox, None
        if box is None:
            return
        destroying = asyncio.ensure_future(box.destroy())
        try:
            await asyncio.shield(destroying)
        except asyncio.CancelledError:
            await destroying  # a cancelled rollout still leaves no sandbox behind
            raise

    async def shell(self, command: str, timeout: float | None = None) -> ExecResult:
        """``command`` under bash in the work dir, killed (with what it started) at ``timeout``."""
        return await self.guarded(
            "command", lambda box: box.run_shell(f"exec bash -c {shlex.quote(command)}", timeout)
        )

    async def run(
        self, argv: list[str], env: dict[str, str], timeout: float | None = None
    ) -> ProgramResult:
        prefix = ["env", *(f"{k}={v}" for k, v in env.items())] if env else []
        result = await self.guarded(
            "run", lambda box: box.run_shell(shlex.join([*prefix, *argv]), timeout)
        )
        return ProgramResult(result.exit_code, result.stdout, result.stderr)

    async def read(self, path: str, max_bytes: int | None = None) -> bytes:
        data = await self.guarded(f"read {path!r}", lambda box: box.download(path))
        if max_bytes is not None and len(data) > max_bytes:
            raise SandboxError(f"read {path!r}: over the {max_bytes} byte limit")
        return data

    async def write(self, path: str, data: bytes) -> None:
        await self.guarded(f"write {path!r}", lambda box: box.upload(path, data))

    def info(self) -> RuntimeInfo:
        box = self.sandbox
        return RuntimeInfo(
            type="subprocess",
            id=box.host_dir.name if box and box.host_dir else None,
        )  # upstream's SubprocessRuntimeInfo takes no other field: the isolation goes in info
