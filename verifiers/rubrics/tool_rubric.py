"""ToolRubric: how often each tool was called, as metrics (weight 0 unless given).

The surface is verifiers 0.1.8's (``tools``, ``oai_tools``, ``tool_names``,
``total_tool_calls(completion)``, ``get_tool_call_count_func(name)``), which environments of later
releases still call; the counting reads dict-era and typed messages alike.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from verifiers.rubrics.rubric import Rubric
from verifiers.types import Messages


def _call_name(call: Any) -> str | None:
    name = getattr(call, "name", None)
    if isinstance(name, str):
        return name
    function = call.get("function") if hasattr(call, "get") else None
    if isinstance(function, dict):
        return function.get("name")
    return getattr(function, "name", None)


def count_tool_calls(completion: Messages, name: str | None = None) -> float:
    """Tool calls in the assistant messages of ``completion`` (of tool ``name``, if given)."""
    if not isinstance(completion, list):
        return 0.0
    total = 0
    for message in completion:
        if message.get("role") != "assistant":
            continue
        for call in message.get("tool_calls") or []:
            if name is None or _call_name(call) == name:
                total += 1
    return float(total)


class ToolRubric(Rubric):
    """Metrics ``total_tool_calls`` and ``<tool>_calls`` for each tool."""

    def __init__(self, tools: list[Callable[..., Any]] | None = None, **kwargs: Any) -> None:
        from verifiers.tools.defs import convert_func_to_oai_tool

        super().__init__(**kwargs)
        self.tools = list(tools or [])
        self.oai_tools = [convert_func_to_oai_tool(tool) for tool in self.tools]
        self.tool_names = [tool.__name__ for tool in self.tools]
        self.add_metric(self.total_tool_calls)
        for name in self.tool_names:
            self.add_metric(self.get_tool_call_count_func(name))

    async def total_tool_calls(self, completion: Messages) -> float:
        """Tool calls across all assistant messages."""
        return count_tool_calls(completion)

    def get_tool_call_count_func(self, tool_name: str) -> Callable[..., Any]:
        """A metric counting calls to ``tool_name`` (named ``<tool_name>_calls``)."""

        async def tool_call_count_func(completion: Messages) -> float:
            return count_tool_calls(completion, tool_name)

        tool_call_count_func.__name__ = f"{tool_name}_calls"
        return tool_call_count_func
