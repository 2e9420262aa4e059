"""What a toolset and the MCP server that serves it both need, below either: the toolset's
config (where its tools run) and how a tool's return value becomes its tool message. The
server (``verifiers.v1.mcp.server``) serves a ``Toolset``, and ``Toolset.run`` starts the
server: this module is what lets the server sit above the toolset without importing it."""

from __future__ import annotations

import json
from typing import Any

from verifiers.v1.configs.base import BaseConfig
from verifiers.v1.configs.runtime import RuntimeConfig, SubprocessConfig
from verifiers.v1.types import (
    ImageUrlContentPart,
    ImageUrlSource,
    MessageContent,
    TextContentPart,
)


class ToolsetConfig(BaseConfig):
    colocated: bool = False
    """Run the tools beside the harness (in-process here) instead of as an MCP server."""
    runtime: RuntimeConfig = SubprocessConfig()
    """Where the toolset's own MCP server runs when not colocated (``subprocess``: a local
    child process of the eval)."""
    url: str | None = None
    """A running MCP server (streamable HTTP, e.g. ``http://host:port/mcp``) whose tools the
    rollout is offered instead; nothing is launched."""


class SharedToolsetConfig(BaseConfig):
    """A toolset one server serves to every rollout of a run (``Taskset.toolsets``, built once
    per env and eval, as upstream's shared tool servers are): an expensive ``setup`` is paid
    once. Each call still sees only its own rollout's ``self.state``, which travels with the
    call. Never colocated: it is a process of its own, or the server at ``url``."""

    runtime: RuntimeConfig = SubprocessConfig()
    """Where the one server runs (``subprocess``: a local child process of the eval)."""
    url: str | None = None
    """A running MCP server every rollout is given instead; nothing is launched."""


def tool_result_content(result: Any) -> MessageContent:
    """A tool's return value as its tool message's content: text, or content parts when it
    returned MCP content blocks with an image (a ``data:`` URL part, as upstream keeps it)."""
    blocks = result if isinstance(result, list) else None
    if blocks and all(getattr(b, "type", None) in ("text", "image") for b in blocks):
        parts: list[TextContentPart | ImageUrlContentPart] = []
        for block in blocks:
            if block.type == "text":
                parts.append(TextContentPart(text=block.text))
            else:
                url = f"data:{block.mimeType};base64,{block.data}"
                parts.append(ImageUrlContentPart(image_url=ImageUrlSource(url=url)))
        if all(isinstance(p, TextContentPart) for p in parts):
            return "\n".join(p.text for p in parts if isinstance(p, TextContentPart))
        return parts
    return tool_result_text(result)


def tool_result_text(result: Any) -> str:
    """A tool's return value as the text of its tool message."""
    if isinstance(result, str):
        return result
    try:
        return json.dumps(result, default=str)
    except (TypeError, ValueError):
        return str(result)
