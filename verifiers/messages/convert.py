"""Between raw message dicts, typed messages and the OpenAI wire shape.

``normalize_messages`` turns whatever an environment wrote (OpenAI-style dicts, typed messages, a
plain string) into typed messages; ``to_wire`` turns either kind into the JSON an OpenAI-compatible
server expects, so the lean HTTP client sends typed and dict conversations alike.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from verifiers.messages.models import (
    AssistantMessage,
    MessageModel,
    Messages,
    TextMessage,
    Tool,
    ToolCall,
    ToolMessage,
)
from verifiers.messages.models import (
    from_raw_message as from_raw_message,  # moved beside the models; this path stays
)
from verifiers.messages.models import (
    tool_call_from_raw as tool_call_from_raw,
)


def normalize_messages(value: str | Sequence[Any], *, field_name: str = "messages") -> Messages:
    """Raw dicts, typed messages or a plain string as a list of typed messages."""
    if isinstance(value, str):
        return [TextMessage(content=value)]
    out: list[Any] = []  # typed messages, and objects that read like one (role, content)
    for message in value:
        if type(message) in _TYPED:
            out.append(message)
        elif isinstance(message, MessageModel) and hasattr(message, "role"):
            out.append(message)
            if "role" in type(message).model_fields and message.__class__ is type(message):
                _TYPED.add(type(message))
        elif isinstance(message, Mapping):
            out.append(from_raw_message(message))
        elif hasattr(message, "role") and hasattr(message, "content"):
            out.append(message)
        else:
            raise TypeError(
                f"Invalid {field_name} item type: {type(message).__name__}. "
                "Expected a message dict or a vf message (vf.UserMessage, ...)."
            )
    return out


_TYPED: set[type] = set()
"""Typed message classes with a ``role`` field, kept as they are by ``normalize_messages``
without its checks (a pydantic class's ``isinstance`` is a Python-level call): a model call
normalizes the whole history, so they ran for every message at every turn."""


def message_role(message: Any) -> str | None:
    value = message.get("role") if isinstance(message, Mapping) else getattr(message, "role", None)
    return value if isinstance(value, str) else None


def message_field(message: Any, key: str, default: Any = None) -> Any:
    """``message[key]`` for dicts, the attribute for typed messages."""
    if isinstance(message, Mapping):
        return message.get(key, default)
    value = getattr(message, key, default)
    return default if value is None else value


def _wire_content(content: Any) -> Any:
    if isinstance(content, list):
        return [
            p.model_dump(exclude_none=True)
            if isinstance(p, MessageModel)
            else ({k: v for k, v in p.items() if v is not None} if isinstance(p, dict) else p)
            for p in content
        ]
    return content


def wire_tool_call(call: Any) -> dict[str, Any]:
    if isinstance(call, ToolCall):
        return {
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": call.arguments},
        }
    if isinstance(call, MessageModel):
        return call.model_dump(exclude_none=True)
    return dict(call) if isinstance(call, Mapping) else call


def to_wire_message(message: Any) -> dict[str, Any]:
    """One message as an OpenAI chat-completions message.

    Typed messages are sent as verifiers 0.1.11+ sends them (an assistant message always carries
    ``content``, ``tool_calls`` and ``reasoning_content``, ``null`` when empty; a ``text``
    message is a user turn); dicts are sent as written, minus the ``None`` keys Arrow adds to
    multimodal content parts.
    """
    route = _ROUTES.get(type(message))
    if route is None:
        route = _route(message)
        if message.__class__ is type(message):  # not an object posing as another class
            _ROUTES[type(message)] = route
    if route == _PLAIN:
        out = dict(message)
        if "content" in out:
            out["content"] = _wire_content(out["content"])
        return out
    if route == _ASSISTANT:
        calls = message.tool_calls
        out = {
            "role": "assistant",
            "content": _wire_content(message.content),
            "tool_calls": [wire_tool_call(c) for c in calls] if calls is not None else None,
            "reasoning_content": message.reasoning_content,
        }
        for key, value in (message.model_extra or {}).items():
            if key not in ("finish_reason", "is_truncated", "tokens"):
                out.setdefault(key, value)
        return out
    if route == _TOOL:
        return {
            "role": "tool",
            "tool_call_id": message.tool_call_id,
            "content": _wire_content(message.content),
        }
    if route == _TEXT:
        return {"role": "user", "content": message.content}
    if route == _MODEL:
        return {
            "role": message["role"],
            "content": _wire_content(getattr(message, "content", None)),
        }
    raise TypeError(f"not a chat message: {type(message).__name__}")


_PLAIN, _ASSISTANT, _TOOL, _TEXT, _MODEL, _NONE = range(6)
_ROUTES: dict[type, int] = {}
"""Which branch of ``to_wire_message`` each message class takes, found once per class: the
checks (an abstract ``Mapping`` check among them) ran for every message of the history at every
model call, ~a fifth of a long multi-turn rollout's CPU."""


def _route(message: Any) -> int:
    if isinstance(message, Mapping) and not isinstance(message, MessageModel):
        return _PLAIN
    for kind, route in ((AssistantMessage, _ASSISTANT), (ToolMessage, _TOOL), (TextMessage, _TEXT)):
        if isinstance(message, kind):
            return route
    return _MODEL if isinstance(message, MessageModel) else _NONE


def to_wire(messages: Sequence[Any]) -> list[dict[str, Any]]:
    return [to_wire_message(m) for m in messages]


def to_plain_message(message: Any) -> Any:
    """A message as the JSON saved in results: OpenAI shape, ``None`` fields left out."""
    if isinstance(message, MessageModel):
        wire = to_wire_message(message)
        if isinstance(message, TextMessage):
            wire["role"] = "text"
        return {k: v for k, v in wire.items() if v is not None}
    return message


def to_plain(messages: Any) -> Any:
    """Messages (a list, or a completion string) as plain JSON-ready values."""
    if isinstance(messages, list):
        return [to_plain_message(m) for m in messages]
    return messages


def tool_from_raw(tool: Any) -> Tool:
    """A tool definition in the neutral shape, from itself, from OpenAI's ``{"type":
    "function", "function": {...}}``, or from any object with its fields (a ``verifiers.v1``
    ``Tool``)."""
    if isinstance(tool, Tool):
        return tool
    if isinstance(tool, Mapping) and tool.get("type") == "function" and "function" in tool:
        function = dict(tool["function"])
        return Tool(
            name=function["name"],
            description=function.get("description") or "",
            parameters=function.get("parameters") or {"type": "object", "properties": {}},
            **({"strict": function["strict"]} if function.get("strict") is not None else {}),
        )
    return Tool.model_validate(tool, from_attributes=True)


def wire_tool(tool: Any) -> dict[str, Any]:
    """A tool definition as OpenAI's chat-completions API takes it."""
    if isinstance(tool, Mapping) and tool.get("type") == "function":
        return dict(tool)
    tool = tool_from_raw(tool)
    function: dict[str, Any] = {
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.parameters,
    }
    if tool.strict is not None:
        function["strict"] = tool.strict
    return {"type": "function", "function": function}
