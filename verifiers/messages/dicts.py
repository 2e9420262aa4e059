"""Messages of the dict era (verifiers 0.1.x before 0.1.11), readable as objects too.

Those releases hand environments plain dicts in OpenAI's shape; code written since reads
messages as objects (``m.role``, ``m.content``, ``m.tool_calls[0].name``), and an environment
whose requirement floor was never raised gets dicts anyway. ``MessageDict`` is a ``dict`` (so
``isinstance(m, dict)``, ``json.dumps``, equality and mutation behave exactly as before) whose
fields also read as attributes; its tool calls read ``call.name`` / ``call.arguments`` from the
nested ``function``. So both access styles work in every release, and ``getattr(m, "role", "")``
never quietly returns the default on a real message.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: fields a message may lack that read as ``None`` when absent (as the typed models default them)
OPTIONAL_FIELDS = frozenset(
    {"content", "tool_calls", "tool_call_id", "name", "reasoning_content", "thinking_blocks"}
)


class AttrReadDict(dict):
    """A dict whose keys also read as attributes (a missing key: ``AttributeError``)."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


class ToolCallDict(AttrReadDict):
    """An OpenAI tool call (``id``, ``type``, ``function: {name, arguments}``); ``.name`` and
    ``.arguments`` read through to ``function``."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        if name in ("name", "arguments") and "function" in self and name not in self:
            function = self["function"]
            return function.get(name) if isinstance(function, Mapping) else getattr(function, name, None)
        if name == "function" and isinstance(self.get("function"), Mapping):
            return AttrReadDict(self["function"])
        return super().__getattr__(name)


class MessageDict(AttrReadDict):
    """A chat message dict whose fields also read as attributes (see the module docstring)."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        if name == "tool_calls" and self.get("tool_calls"):
            return [as_tool_call(c) for c in self["tool_calls"]]
        try:
            return self[name]
        except KeyError:
            if name in OPTIONAL_FIELDS:
                return None
            raise AttributeError(name) from None


def as_tool_call(call: Any) -> Any:
    return ToolCallDict(call) if isinstance(call, dict) and not isinstance(call, ToolCallDict) else call


def as_message(message: Any) -> Any:
    """One message as a ``MessageDict``: a dict keeps its keys, a typed message becomes its
    OpenAI-shaped dict (the dict era's form), anything else is returned unchanged."""
    if isinstance(message, MessageDict):
        return message
    if isinstance(message, dict):
        return MessageDict(message)
    if hasattr(message, "model_dump") and hasattr(message, "role"):
        from verifiers.messages.convert import to_wire_message

        return MessageDict({k: v for k, v in to_wire_message(message).items() if v is not None})
    return message


def as_messages(messages: Any) -> Any:
    """A message list as ``MessageDict``s (a completion string is returned unchanged)."""
    if isinstance(messages, list):
        return [as_message(m) for m in messages]
    return messages
