"""The ``subprocess`` runtime: one confined sandbox of ``verifiers.sandbox`` per rollout, with
the isolation the machine offers (bwrap, else Landlock; never unconfined). Commands run in
its work dir (files persist between them, the shell does not); a file path is read and written
beneath that dir. A sandbox that cannot start, crashes or stops answering raises the v1
``SandboxError``, which ends that rollout only."""

from __future__ import annotations

import asyncio
import hashlib
import shlex
from collections.abc import Awaitable, Callable
from typing import TypeVar

from verifiers import errors
from verifiers.sandbox import ExecResult, LocalSandbox, SandboxLimits, probe_mode
from verifiers.v1.configs.runtime import RuntimeInfo, SubprocessConfig
from verifiers.v1.errors import SandboxError
from verifiers.v1.runtimes.base import ProgramResult, Runtime
from verifiers.v1.runtimes.uv_scripts import cache_root, sandbox_interpreter, script_site

T = TypeVar("T")

UV_SCRIPT_WALL_S = 120.0
"""A uv script's wall-clock limit at least (a verifier importing sympy takes seconds of CPU,
more on a loaded machine); the sandbox's CPU limit still holds."""


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
            # the process's prepared script environments, read-only (``prepare_uv_script``)
            limits = self.limits.model_copy(
                update={"read_only_dirs": [*self.limits.read_only_dirs, str(cache_root())]}
            )
            self.sandbox = await LocalSandbox(self.mode, limits).start()
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

    async def prepare_uv_script(
        self, script: str | bytes, env: dict[str, str] | None = None, *, activate: bool = True
    ) -> list[str]:
        """The argv that runs the PEP 723 ``script`` in this box: its dependencies installed
        on the host as wheels (``uv_scripts``, once per process and script), the script
        written to ``/tmp/vf-scripts/<sha256>.py`` in the box. ``env`` and ``activate`` are
        upstream's (its uv settings and virtualenv activation); nothing here needs them."""
        data = script.encode() if isinstance(script, str) else script
        if self.sandbox is None:
            raise SandboxError("uv script: the rollout's sandbox is not running")
        python = sandbox_interpreter(self.mode or "bwrap")
        site = await script_site(data, python)
        digest = hashlib.sha256(data).hexdigest()
        staged, path = f".vf-script-{digest}.py", f"/tmp/vf-scripts/{digest}.py"
        await self.write(staged, data)
        moved = await self.shell(f"mkdir -p /tmp/vf-scripts && mv -f {staged} {path}")
        if moved.exit_code != 0:
            raise SandboxError(f"uv script: could not place it in the box: {moved.output[-500:]}")
        return [*(["env", f"PYTHONPATH={site}"] if site else []), python, path]

    async def run_uv_script(
        self,
        script: str | bytes,
        args: list[str] | None = None,
        env: dict[str, str] | None = None,
    ) -> ProgramResult:
        """Run the PEP 723 ``script`` with ``args`` in this box (``prepare_uv_script``)."""
        argv = await self.prepare_uv_script(script, env)
        timeout = max(self.limits.wall_time_s, UV_SCRIPT_WALL_S)
        return await self.run([*argv, *(args or [])], env or {}, timeout)

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
