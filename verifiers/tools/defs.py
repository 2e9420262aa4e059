"""Tool definitions from Python functions, in the two shapes environments hand to a model: the
OpenAI chat-completions dict (the dict era) and the provider-neutral ``vf.Tool`` (0.1.11+)."""

from __future__ import annotations

from typing import Any

from verifiers import classic
from verifiers.messages.convert import tool_from_raw
from verifiers.messages.models import Tool
from verifiers.tools.schema import tool_spec


def convert_func_to_oai_tool(func: Any) -> dict[str, Any]:
    """``func`` as an OpenAI chat-completions tool (``{"type": "function", "function": ...}``)."""
    return tool_spec(func).schema


def convert_func_to_tool_def(func: Any) -> Tool:
    """``func`` as a provider-neutral ``vf.Tool`` (marked ``strict`` from release 0.2.0 on)."""
    tool = tool_from_raw(tool_spec(func).schema)
    if classic.current().strict_tool_defs:
        tool = tool.model_copy(update={"strict": True})
    return tool
