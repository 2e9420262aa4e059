"""The OpenAI chat-completions wire: v1 messages and tools to request dicts and a completion
back to a v1 ``AssistantMessage``, and the ``AsyncOpenAI`` client of a ``BaseClientConfig``
(what a judge and the ``null`` harness call a model with)."""

from __future__ import annotations

import os
from typing import Any

from openai import AsyncOpenAI

from verifiers.messages.convert import wire_tool
from verifiers.v1.configs.client import BaseClientConfig
from verifiers.v1.types import (
    AssistantMessage,
    Message,
    ToolCall,
)

CLIENT_TIMEOUT = 600.0

# One v1 tool as a chat-completions request tool: the classic clients' conversion, one copy.
tool_to_wire = wire_tool


def open_client(
    config: BaseClientConfig, base_url: str | None = None, api_key: str | None = None
) -> AsyncOpenAI:
    """A client for ``config``'s endpoint (``base_url`` and ``api_key`` fill in when the config names none).
    The key is read from the variable ``api_key_var`` names; a local endpoint needs none."""
    return AsyncOpenAI(
        base_url=config.base_url or base_url,
        api_key=(api_key if config.base_url is None and api_key else None)
        or os.environ.get(config.api_key_var)
        or "EMPTY",
        default_headers=config.headers or None,
        timeout=CLIENT_TIMEOUT,
        max_retries=0,
    )


def message_to_wire(message: Message) -> dict[str, Any]:
    """One v1 message as a chat-completions request message."""
    if isinstance(message, AssistantMessage):
        wire: dict[str, Any] = {"role": "assistant", "content": message.content}
        if message.tool_calls:
            wire["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in message.tool_calls
            ]
        return wire
    return message.model_dump(mode="json", exclude_none=True)


def message_from_completion(message: Any) -> AssistantMessage:
    """The assistant message of a chat completion's first choice."""
    calls = [
        ToolCall(
            id=call.id or f"call_{i}",
            name=call.function.name or "",
            arguments=call.function.arguments or "",
        )
        for i, call in enumerate(getattr(message, "tool_calls", None) or [])
        if getattr(call, "function", None) is not None
    ]
    reasoning = getattr(message, "reasoning_content", None) or getattr(message, "reasoning", None)
    return AssistantMessage(
        content=message.content,
        reasoning_content=reasoning if isinstance(reasoning, str) else None,
        tool_calls=calls or None,
    )
