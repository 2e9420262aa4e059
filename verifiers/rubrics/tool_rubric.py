"""ToolRubric: how often each tool was called, as metrics (weight 0 unless given)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from verifiers.rubrics.rubric import Rubric
from verifiers.types import Messages


def _count_calls(completion: Messages, name: str | None) -> float:
    if not isinstance(completion, list):
        return 0.0
    total = 0
    for message in completion:
        for call in message.get("tool_calls") or []:
            if name is None or (call.get("function") or {}).get("name") == name:
                total += 1
    return float(total)


class ToolRubric(Rubric):
    """Metrics ``total_tool_calls`` and ``<tool>_calls`` for each tool."""

    def __init__(self, tools: list[Callable[..., Any]] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.tools = list(tools or [])

        def total_tool_calls(completion: Messages, **_: Any) -> float:
            return _count_calls(completion, None)

        self.add_metric(total_tool_calls)
        for tool in self.tools:
            self.add_metric(self._counter(tool.__name__))

    @staticmethod
    def _counter(name: str) -> Callable[..., float]:
        def count(completion: Messages, **_: Any) -> float:
            return _count_calls(completion, name)

        count.__name__ = f"{name}_calls"
        return count
