"""StatefulToolEnv: tools that need per-rollout state the model never sees (ids, handles, sandboxes)."""

from __future__ import annotations

from typing import Any

from verifiers.concurrency import maybe_await
from verifiers.envs.tool_env import ToolEnv, tool_name
from verifiers.types import Messages, State


class StatefulToolEnv(ToolEnv):
    """Register tools with ``add_tool(func, args_to_skip=[...])``: skipped arguments are hidden from
    the schema, dropped if the model sends them, and filled in by ``update_tool_args``."""

    def __init__(self, tools: list[Any] | None = None, max_turns: int = 10, **kwargs: Any) -> None:
        super().__init__(tools=tools, max_turns=max_turns, **kwargs)
        self.skipped_args: dict[str, list[str]] = {}

    def add_tool(self, tool: Any, args_to_skip: list[str] | None = None) -> None:
        super().add_tool(tool, args_to_skip=list(args_to_skip or []))
        self.skipped_args[tool_name(tool)] = list(args_to_skip or [])

    def remove_tool(self, tool: Any) -> None:
        super().remove_tool(tool)
        self.skipped_args.pop(tool if isinstance(tool, str) else tool_name(tool), None)

    def update_tool_args(
        self,
        tool_name: str,
        tool_args: dict[str, Any],
        messages: Messages,
        state: State,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """Return the arguments to call ``tool_name`` with (override to inject state)."""
        return tool_args

    async def prepare_tool_args(
        self, tool_name: str, tool_args: dict[str, Any], messages: Messages, state: State
    ) -> dict[str, Any]:
        result = await maybe_await(self.update_tool_args, tool_name, tool_args, messages, state)
        return tool_args if result is None else result
