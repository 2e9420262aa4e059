"""Classic module path ``verifiers.utils.response_utils`` (async like the classic functions)."""

from __future__ import annotations

from typing import Any

from verifiers.clients.responses import finish_reason, response_messages, response_tokens
from verifiers.types import Messages, MessageType, TrajectoryStepTokens


async def parse_response_messages(response: Any, message_type: MessageType) -> Messages:
    return response_messages(response, message_type)


async def parse_response_tokens(
    response: Any, message_type: MessageType, max_seq_len: int | None = None
) -> TrajectoryStepTokens | None:
    return response_tokens(response, message_type, max_seq_len)


async def parse_is_truncated(response: Any, message_type: MessageType) -> bool:
    return finish_reason(response) == "length"


__all__ = ["parse_is_truncated", "parse_response_messages", "parse_response_tokens"]
