"""StatefulToolEnv: tools that need per-rollout state the model never sees (ids, handles, sandboxes)."""

from __future__ import annotations

import inspect
from typing import Any

from verifiers.envs.tool_env import ToolEnv
from verifiers.types import Messages, State


class StatefulToolEnv(ToolEnv):
    """Register tools with ``add_tool(func, args_to_skip=[...])``: skipped arguments are hidden from
    the schema, dropped if the model sends them, and filled in by ``update_tool_args``."""

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
        result = self.update_tool_args(
            tool_name=tool_name, tool_args=tool_args, messages=messages, state=state
        )
        if inspect.isawaitable(result):
            result = await result
        return tool_args if result is None else result
