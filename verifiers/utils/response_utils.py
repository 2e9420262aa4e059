"""Classic module path ``verifiers.utils.response_utils`` (async, as the classic functions are)."""

from verifiers.envs.model_turn import (
    parse_is_truncated,
    parse_response_message,
    parse_response_messages,
    parse_response_tokens,
)

__all__ = [
    "parse_is_truncated",
    "parse_response_message",
    "parse_response_messages",
    "parse_response_tokens",
]
