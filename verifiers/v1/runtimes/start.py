"""Starting the box a runtime config names: above every runtime kind (``base`` is below them)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from verifiers.v1.errors import SandboxError
from verifiers.v1.runtimes.base import Runtime, check_runtime
from verifiers.v1.runtimes.subprocess import SubprocessRuntime

if TYPE_CHECKING:
    from verifiers.sandbox import SandboxLimits
    from verifiers.v1.configs.runtime import RuntimeConfig


async def open_runtime(config: RuntimeConfig, limits: SandboxLimits) -> Runtime:
    """The started box ``config`` names (a ``SandboxError`` when it cannot start)."""
    check_runtime(config)
    runtime = SubprocessRuntime(config, limits)  # type: ignore[arg-type]  # check_runtime narrowed it
    try:
        await runtime.start()
    except BaseException:
        await runtime.stop()
        raise
    if runtime.sandbox is None:  # pragma: no cover - start() either sets it or raises
        raise SandboxError("the sandbox did not start")
    return runtime
