"""SandboxEnv: a tool environment whose tools run in a sandbox of their own per rollout.

The sandbox is requested in ``setup_state`` and boots (or comes from the warm pool) while the
model writes its first reply; tools wait for it only if they are called before it is ready.
It is destroyed when the rollout ends, whatever ended it; the provider is closed at teardown.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any, TypedDict

from verifiers.decorators import cleanup, teardown
from verifiers.envs.stateful_tool_env import StatefulToolEnv
from verifiers.sandbox.base import Sandbox, SandboxError, SandboxLimits, SandboxProvider
from verifiers.types import Messages, State


class SandboxState(TypedDict):
    """``state["sandbox_state"]``: whether the rollout's sandbox is up, how long the rollout
    waited for it, and how long each command took (seconds)."""

    ready: bool
    ready_wait_time: float
    command_execution_times: list[float]


class SandboxEnv(StatefulToolEnv):
    """Gives the model a ``bash`` tool in a per-rollout sandbox.

    Args:
        sandbox_provider: where sandboxes come from (default: a pooled ``LocalSandboxProvider``).
        sandbox_limits: per-sandbox limits (time, memory, processes, ...).
        sandbox_mode: isolation for the default provider: auto (bwrap, else landlock) or unsafe.
        pool_size: sandboxes kept warm by the default provider.
    """

    def __init__(
        self,
        sandbox_provider: SandboxProvider | None = None,
        sandbox_limits: SandboxLimits | None = None,
        sandbox_mode: str = "auto",
        pool_size: int = 4,
        max_turns: int = 10,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("error_formatter", lambda e: f"{type(e).__name__}: {e}")
        super().__init__(max_turns=max_turns, **kwargs)
        self._sandbox_errors: dict[str, list[str]] = {}
        self.sandbox_limits = sandbox_limits or SandboxLimits()
        self._provider = sandbox_provider
        self._owns_provider = sandbox_provider is None
        self._sandbox_mode, self._pool_size = sandbox_mode, pool_size
        self._sandboxes: dict[str, asyncio.Task[Sandbox]] = {}
        self._sandbox_states: dict[str, SandboxState] = {}
        self.add_tool(self.bash, args_to_skip=["sandbox_id"])

    @property
    def provider(self) -> SandboxProvider:
        if self._provider is None:
            from verifiers.sandbox.provider import LocalSandboxProvider

            self._provider = LocalSandboxProvider(
                limits=self.sandbox_limits, mode=self._sandbox_mode, pool_size=self._pool_size
            )
        return self._provider

    @property
    def sandbox_mode(self) -> str:
        if self._provider is None and self._owns_provider:
            from verifiers.sandbox.provider import probe_mode

            return self._sandbox_mode if self._sandbox_mode != "auto" else probe_mode()
        return self.provider.mode

    def run_metadata(self) -> dict[str, Any]:
        from verifiers.sandbox.budget import available_kind

        return {
            **super().run_metadata(),
            "sandbox_mode": self.sandbox_mode,
            "sandbox_budget": available_kind(),  # cgroup2, cgroup1 or per-process rlimits only
        }

    async def setup_state(self, state: State, **kwargs: Any) -> State:
        sandbox_id = uuid.uuid4().hex
        state["sandbox_id"] = sandbox_id
        state["sandbox_mode"] = self.sandbox_mode
        state["sandbox_state"] = self._sandbox_states[sandbox_id] = SandboxState(
            ready=False, ready_wait_time=0.0, command_execution_times=[]
        )
        self._sandboxes[sandbox_id] = asyncio.ensure_future(
            self.provider.create(self.sandbox_limits)
        )
        return await super().setup_state(state, **kwargs)

    async def sandbox(self, sandbox_id: str) -> Sandbox:
        task = self._sandboxes.get(sandbox_id)
        if task is None:
            raise SandboxError("this rollout's sandbox is gone")
        info = self._sandbox_states.get(sandbox_id)
        if info is not None and not info["ready"]:
            started = time.monotonic()
            box = await task
            info["ready"], info["ready_wait_time"] = True, time.monotonic() - started
            return box
        return await task

    def update_tool_args(
        self,
        tool_name: str,
        tool_args: dict[str, Any],
        messages: Messages,
        state: State,
        **kwargs: Any,
    ) -> dict[str, Any]:
        if tool_name in ("bash", "python"):
            return {**tool_args, "sandbox_id": state["sandbox_id"]}
        return tool_args

    async def bash(self, command: str, sandbox_id: str) -> str:
        """Run a shell command in your sandbox and return its output.

        Args:
            command: The shell command to run, e.g. "ls -la" or "python3 script.py".
        """
        result = await self.in_sandbox(sandbox_id, lambda box: box.run_shell(command))
        return result.output + (
            "" if result.exit_code == 0 or result.timed_out else f"\n[exit code {result.exit_code}]"
        )

    async def in_sandbox(self, sandbox_id: str, action: Any) -> Any:
        """Run ``action(sandbox)``; a SandboxError is noted for the rollout, then re-raised (the
        model sees it as the tool's error and the rollout goes on)."""
        try:
            box = await self.sandbox(sandbox_id)
            started = time.monotonic()
            try:
                return await action(box)
            finally:
                info = self._sandbox_states.get(sandbox_id)
                if info is not None:
                    info["command_execution_times"].append(time.monotonic() - started)
        except SandboxError as exc:
            self._sandbox_errors.setdefault(sandbox_id, []).append(f"SandboxError: {exc}")
            raise

    @cleanup
    async def destroy_sandbox(self, state: State) -> None:
        self._sandbox_states.pop(state.get("sandbox_id") or "", None)
        crashed = self._sandbox_errors.pop(state.get("sandbox_id") or "", None)
        if crashed:
            state.setdefault("sandbox_errors", []).extend(crashed)
        task = self._sandboxes.pop(state.get("sandbox_id") or "", None)
        if task is None:
            return
        if not task.done():
            task.cancel()
        try:
            sandbox = await task
        except (asyncio.CancelledError, Exception):
            return
        await sandbox.destroy()

    async def end_run(self) -> None:
        """Sandboxes and the warm pool never outlive the run (their processes belong to its loop)."""
        for sandbox_id in list(self._sandboxes):
            await self.destroy_sandbox({"sandbox_id": sandbox_id})
        if self._provider is not None and self._owns_provider:
            await self._provider.close()
            self._provider = None
        await super().end_run()

    @teardown
    async def close_provider(self) -> None:
        await self.end_run()
        if self._provider is not None:
            await self._provider.close()
