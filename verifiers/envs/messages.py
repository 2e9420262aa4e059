"""Conversation helpers: joining message lists (or completion strings) and cleaning prompts.

Dict-era replies may be dicts or typed messages (an environment whose requirement floor was
never raised); both become ``MessageDict``s, readable as dicts and as objects.
"""

from __future__ import annotations

from typing import Any

from verifiers.messages.dicts import as_message, as_messages
from verifiers.types import Messages


def concat_messages(parts: list[Any]) -> Messages:
    """Join conversation pieces: strings concatenate; lists and single messages flatten in order."""
    if all(isinstance(p, str) for p in parts):
        return "".join(parts)
    out: list[Any] = []
    for part in parts:
        if isinstance(part, list):
            out.extend(part)
        elif isinstance(part, str):
            if part:
                out.append({"role": "user", "content": part})
        else:
            out.append(part)
    return out


def strip_nones_from_content(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Drop the ``None`` keys Arrow adds to multimodal content parts when it unifies a schema."""
    result = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            message = dict(message)
            message["content"] = [
                {k: v for k, v in part.items() if v is not None} if isinstance(part, dict) else part
                for part in content
            ]
        result.append(message)
    return result


def normalize_env_messages(result: Any, message_type: str, what: str = "env_response") -> Messages:
    """An environment's reply as a message list (chat) or string (completion), or a clear error.

    Accepts a single message dict, a list of messages, ``None`` (nothing to say), and the older
    ``(messages, state)`` tuple.
    """
    if isinstance(result, tuple) and len(result) == 2:
        result = result[0]
    if result is None:
        return [] if message_type == "chat" else ""
    if message_type == "chat":
        if isinstance(result, dict) or hasattr(result, "role"):
            result = [result]
        if isinstance(result, str):
            return [as_message({"role": "user", "content": result})]
        result = as_messages(result) if isinstance(result, list) else result
        if not isinstance(result, list) or not all(
            isinstance(m, dict) and "role" in m for m in result
        ):
            raise TypeError(f"{what} must return a list of chat messages, got {result!r:.120}")
        return result
    if not isinstance(result, str):
        raise TypeError(
            f"{what} must return a string in completion mode, got {type(result).__name__}"
        )
    return result
