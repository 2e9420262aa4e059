"""ToolEnv: the model calls Python functions; the rollout ends when it answers without tools.

The classic attributes are plain and assignable (``tools``, ``oai_tools``, ``tool_map``), so a
subclass that fills them itself (an MCP client, a remote tool server) works; ``call_tool`` is the
override point for how one call runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from verifiers.concurrency import maybe_await
from verifiers.decorators import stop
from verifiers.envs.multiturn_env import MultiTurnEnv
from verifiers.tools.calls import (
    DEFAULT_MAX_OUTPUT_CHARS,
    ToolCallError,
    format_output,
    parse_arguments,
)
from verifiers.tools.schema import ToolSpec, tool_spec
from verifiers.types import Messages, State


def tool_name(tool: Any) -> str:
    return getattr(tool, "__name__", None) or type(tool).__name__


class ToolEnv(MultiTurnEnv):
    """``tools`` are plain functions (sync or async) with type hints and docstrings.

    Calls in one assistant message run concurrently (sync tools in threads). Arguments are
    validated against the schema before the tool runs; malformed JSON, unknown tools, wrong types
    and exceptions come back to the model as tool messages (``error_formatter`` words them).
    Per-example tool lists (``info["oai_tools"]``) restrict which tools a rollout may call.
    """

    def __init__(
        self,
        tools: list[Callable[..., Any]] | None = None,
        max_turns: int = 10,
        error_formatter: Callable[[Exception], str] = lambda e: f"{e}",
        max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS,
        **kwargs: Any,
    ) -> None:
        self.tools: list[Callable[..., Any]] = list(tools or [])
        self.error_formatter = error_formatter
        self.max_output_chars = max_output_chars
        self.tool_specs: dict[str, ToolSpec] = {}
        self.tool_map: dict[str, Callable[..., Any]] = {}
        oai_tools = []
        for tool in self.tools:
            spec = self._register(tool)
            oai_tools.append(spec.schema)
        kwargs.setdefault("oai_tools", oai_tools or None)
        super().__init__(max_turns=max_turns, **kwargs)
        if self.oai_tools is None:
            self.oai_tools = []

    def _register(
        self, tool: Callable[..., Any], args_to_skip: list[str] | None = None
    ) -> ToolSpec:
        name = tool_name(tool)
        if name in self.tool_map:
            raise ValueError(f"two tools are named {name!r}")
        spec = tool_spec(tool, args_to_skip or [])
        self.tool_specs[name] = spec
        self.tool_map[name] = tool
        return spec

    def add_tool(self, tool: Callable[..., Any], args_to_skip: list[str] | None = None) -> None:
        spec = self._register(tool, args_to_skip)
        if tool not in self.tools:
            self.tools.append(tool)
        self.oai_tools = [*(self.oai_tools or []), spec.schema]

    def remove_tool(self, tool: Callable[..., Any] | str) -> None:
        name = tool if isinstance(tool, str) else tool_name(tool)
        func = self.tool_map.pop(name, None)
        self.tool_specs.pop(name, None)
        self.tools = [t for t in self.tools if t is not func]
        self.oai_tools = [t for t in self.oai_tools or [] if t["function"]["name"] != name]

    def allowed_tool_names(self, state: State) -> set[str] | None:
        """Names this rollout may call: those of ``state["oai_tools"]`` (None: no restriction)."""
        listed = state.get("oai_tools")
        if not listed:
            return None
        return {(t.get("function") or {}).get("name") for t in listed}

    def monitor_metrics(self, state: State) -> dict[str, float]:
        counts: dict[str, float] = {name: 0.0 for name in self.tool_map}
        total = 0
        for message in state.get("completion") or []:
            if not isinstance(message, dict):
                continue
            for call in message.get("tool_calls") or []:
                name = (call.get("function") or {}).get("name") or "?"
                counts[name] = counts.get(name, 0.0) + 1
                total += 1
        return {
            **super().monitor_metrics(state),
            "total_tool_calls": float(total),
            **{f"{name}_calls": value for name, value in counts.items()},
        }

    @stop
    async def no_tools_called(self, state: State) -> bool:
        if not state["trajectory"]:
            return False
        completion = state["trajectory"][-1]["completion"]
        if not isinstance(completion, list) or not completion:
            return False
        last = completion[-1]
        return last.get("role") == "assistant" and not last.get("tool_calls")

    async def call_tool(
        self, tool_name: str, tool_args: dict[str, Any], tool_call_id: str, **kwargs: Any
    ) -> dict[str, Any]:
        """Run one tool call and answer with its tool message; failures become the message."""
        try:
            func = self.tool_map.get(tool_name)
            if func is None:
                available = ", ".join(sorted(self.tool_map)) or "none"
                raise ToolCallError(f"unknown tool {tool_name!r}; available tools: {available}")
            spec = self.tool_specs.get(tool_name)
            if spec is not None and spec.func is func:  # registered here: validate, then run
                kwargs_ = spec.validate(tool_args)
                if spec.is_async:
                    result = await func(**kwargs_)
                else:
                    result = await asyncio.to_thread(func, **kwargs_)
            else:  # a tool a subclass put in tool_map itself (MCP wrappers...): called as is
                result = await maybe_await(func, **tool_args)
            content = format_output(result, self.max_output_chars)
        except Exception as exc:  # the model sees what went wrong and can correct itself
            content = self.error_formatter(exc)
        return {"role": "tool", "content": content, "tool_call_id": tool_call_id}

    async def prepare_tool_args(
        self, tool_name: str, tool_args: dict[str, Any], messages: Messages, state: State
    ) -> dict[str, Any]:
        return tool_args

    async def _one_call(
        self, call: dict[str, Any], messages: Messages, state: State
    ) -> dict[str, Any]:
        call_id = call.get("id") or ""
        function = call.get("function") or {}
        name = function.get("name") or ""
        try:
            allowed = self.allowed_tool_names(state)
            if allowed is not None and name not in allowed:
                available = ", ".join(sorted(n for n in allowed if n)) or "none"
                raise ToolCallError(f"unknown tool {name!r}; available tools: {available}")
            args = parse_arguments(function.get("arguments"))
            spec = self.tool_specs.get(name)
            if spec is not None:
                args = {k: v for k, v in args.items() if k not in spec.hidden}
            args = await self.prepare_tool_args(name, args, messages, state)
        except Exception as exc:
            return {"role": "tool", "content": self.error_formatter(exc), "tool_call_id": call_id}
        return await self.call_tool(name, args, call_id)

    async def env_response(self, messages: Messages, state: State, **kwargs: Any) -> Messages:
        if not isinstance(messages, list) or not messages:
            return []
        calls = messages[-1].get("tool_calls") or []
        counts = state.setdefault("tool_calls_made", {})
        for call in calls:
            name = (call.get("function") or {}).get("name") or "?"
            counts[name] = counts.get(name, 0) + 1
        return list(await asyncio.gather(*(self._one_call(c, messages, state) for c in calls)))
