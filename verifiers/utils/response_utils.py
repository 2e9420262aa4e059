"""Classic module path ``verifiers.utils.response_utils`` (async, as the classic functions are).

Each function takes both releases' reply shapes: a ``vf.Response`` (0.1.11+) or the server's
chat-completion JSON (earlier), and both call signatures (``parse_response_tokens(response,
max_seq_len)`` and the older ``(response, message_type, max_seq_len)``).
"""

from __future__ import annotations

from typing import Any

from verifiers.clients.responses import finish_reason, response_messages, response_tokens
from verifiers.envs.model_turn import typed_completion, typed_tokens
from verifiers.messages.models import Response
from verifiers.types import Messages, TrajectoryStepTokens


async def parse_response_message(response: Response) -> Messages:
    """The reply as its completion: one ``vf.AssistantMessage``."""
    return typed_completion(response)


async def parse_response_messages(response: Any, message_type: str = "chat") -> Messages:
    if isinstance(response, Response):
        return typed_completion(response)
    return response_messages(response, "completion" if message_type == "completion" else "chat")


async def parse_response_tokens(
    response: Any, message_type: Any = None, max_seq_len: int | None = None
) -> TrajectoryStepTokens | None:
    if isinstance(message_type, int) and not isinstance(message_type, bool):
        message_type, max_seq_len = None, message_type
    if response is None or isinstance(response, Response):
        tokens = typed_tokens(response, max_seq_len)
        if response is not None and response.message.tokens is not None:
            # moved, not copied, as the classic function does: the step holds them now
            response.message.tokens.prompt_attribution = None
            response.message.tokens.multi_modal_data = None
        return tokens
    return response_tokens(response, message_type or "chat", max_seq_len)


async def parse_is_truncated(response: Any, message_type: str = "chat") -> bool:
    if isinstance(response, Response):
        return bool(response.message.is_truncated)
    return finish_reason(response) == "length"


__all__ = [
    "parse_is_truncated",
    "parse_response_message",
    "parse_response_messages",
    "parse_response_tokens",
]
