"""Classic module path ``verifiers.utils.message_utils``: building and reading messages."""

from verifiers.envs.messages import concat_messages, strip_nones_from_content
from verifiers.messages.convert import from_raw_message, message_role, normalize_messages
from verifiers.messages.reading import (
    get_messages,
    maybe_normalize_messages,
    messages_to_printable,
    serialize_messages_for_output,
)
from verifiers.results.outputs import sanitize_tool_calls

__all__ = [
    "concat_messages",
    "from_raw_message",
    "get_messages",
    "maybe_normalize_messages",
    "message_role",
    "messages_to_printable",
    "normalize_messages",
    "sanitize_tool_calls",
    "serialize_messages_for_output",
    "strip_nones_from_content",
]
