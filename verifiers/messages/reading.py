"""Reading message lists the classic ways (``verifiers.utils.message_utils``'s functions): typed
on demand, filtered by role, plain for output, printable for logs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from verifiers.messages.convert import normalize_messages, to_plain
from verifiers.messages.models import MessageModel, Messages


def maybe_normalize_messages(value: Any, *, field_name: str = "messages") -> Messages:
    """``value`` as typed messages, converting only when it is not already a list of them."""
    if isinstance(value, list) and all(isinstance(m, MessageModel) for m in value):
        return value
    return normalize_messages(value, field_name=field_name)


def get_messages(messages: Sequence[Any], role: str | None = None) -> Messages:
    """Typed messages, optionally only those of ``role``."""
    typed = normalize_messages(messages)
    return typed if role is None else [m for m in typed if m.role == role]


def serialize_messages_for_output(messages: Any) -> Any:
    return to_plain(messages)


def messages_to_printable(messages: Any) -> Any:
    """Messages for logs: images shown as ``[image]``, audio as ``[audio]``."""
    plain = to_plain(messages)
    if not isinstance(plain, list):
        return plain
    out = []
    for message in plain:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            texts = []
            for part in content:
                kind = part.get("type") if isinstance(part, dict) else None
                if kind == "text":
                    texts.append(part.get("text", ""))
                elif kind == "image_url":
                    texts.append("[image]")
                elif kind in ("input_audio", "audio"):
                    texts.append("[audio]")
            message = {**message, "content": " ".join(texts).strip()}
        out.append(message)
    return out
