"""Executing the model's tool calls: parse, validate, run, and always answer with a tool message.

Nothing a model sends can raise out of here: malformed or double-encoded JSON, unknown tools,
wrong argument types and exceptions inside the tool all become a tool message that tells the
model what went wrong, so it can correct itself on the next turn.
"""

from __future__ import annotations

import json
from typing import Any

from verifiers.errors import ToolCallError  # a call that cannot run; its message goes to the model

DEFAULT_MAX_OUTPUT_CHARS = 8192


def parse_arguments(raw: Any) -> dict[str, Any]:
    """Arguments as a dict, accepting a JSON object, a double-encoded one, or an empty string."""
    value = raw
    for _ in range(2):  # some models JSON-encode the arguments string twice
        if isinstance(value, dict):
            return value
        if value is None or (isinstance(value, str) and not value.strip()):
            return {}
        if not isinstance(value, str):
            break
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ToolCallError(
                f"arguments are not valid JSON ({exc.msg} at position {exc.pos}): {raw!r:.200}"
            ) from exc
    if isinstance(value, dict):
        return value
    raise ToolCallError(
        f"arguments must be a JSON object, got {type(value).__name__}: {raw!r:.200}"
    )


TOOL_CONTENT_PART_TYPES = frozenset({"text", "image_url"})


def is_valid_tool_content_parts(value: Any) -> bool:
    """True for a list of ``text`` / ``image_url`` content parts (sent to the model as they are)."""
    return isinstance(value, list) and all(
        isinstance(item, dict) and item.get("type") in TOOL_CONTENT_PART_TYPES for item in value
    )


def format_output(result: Any, max_chars: int) -> Any:
    """A tool's result as message content: content parts as they are, anything else as
    ``str(result)`` (as the classic SDK sends it), cut at ``max_chars`` with a note."""
    if is_valid_tool_content_parts(result):
        return result
    text = result if isinstance(result, str) else str(result)
    if len(text) > max_chars:
        text = (
            text[:max_chars] + f"\n...[output truncated: {len(text) - max_chars} more characters]"
        )
    return text
