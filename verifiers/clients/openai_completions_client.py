"""``vf.OpenAICompletionsClient``: the text-completions API (``/completions``) as a ``vf.Client``.

The conversation's text parts are joined with blank lines into one prompt, as verifiers 0.1.11+
does; images and tools are refused with a message naming the API that supports them.
"""

from __future__ import annotations

from typing import Any

from verifiers.clients.openai_chat_completions_client import (
    OpenAIEndpointClient,
    content_text,
    finish_of,
    only_choice,
    reply_extras,
    response_header,
    tokens_of,
    usage_of,
)
from verifiers.clients.responses import field, first_choice
from verifiers.errors import EmptyModelResponseError
from verifiers.messages.convert import message_field
from verifiers.messages.models import Messages, Response, ResponseMessage, Tool
from verifiers.types import SamplingArgs

NOT_TEXT = (
    "The completions API takes text only (this prompt has {kind} content); use the chat "
    "completions or Anthropic messages client instead."
)


def prompt_text(messages: Messages | str) -> str:
    """One text prompt from a conversation (parts joined by blank lines)."""
    if isinstance(messages, str):
        return messages
    parts = []
    for message in messages:
        content = message_field(message, "content", "")
        if isinstance(content, list):
            for part in content:
                kind = field(part, "type")
                if kind != "text":
                    raise ValueError(NOT_TEXT.format(kind=kind))
        parts.append(content_text(content))
    return "\n\n".join(parts)


class OpenAICompletionsClient(OpenAIEndpointClient[str, None]):
    """``/completions`` (see the module docstring)."""

    CLIENT_TYPE = "openai_completions"

    async def to_native_prompt(self, messages: Messages) -> tuple[str, dict[str, Any]]:
        return prompt_text(messages), {}

    async def to_native_tool(self, tool: Tool) -> None:
        raise ValueError("Tools are not supported by the completions API; use chat completions")

    async def get_native_response(
        self,
        prompt: str,
        model: str,
        sampling_args: SamplingArgs,
        tools: list[None] | None = None,
        **kwargs: Any,
    ) -> Any:
        if tools:
            raise ValueError("Tools are not supported by the completions API; use chat completions")
        args = {k: v for k, v in dict(sampling_args or {}).items() if v is not None}
        return await self._transport.complete(
            model=model,
            prompt=prompt,
            sampling_args=args,
            headers=kwargs.get("extra_headers") or None,
        )

    async def raise_from_native_response(self, response: Any) -> None:
        if not field(only_choice(response), "text"):
            raise EmptyModelResponseError("Model returned no content")

    async def from_native_response(self, response: Any) -> Response:
        choice = first_choice(response)
        return Response(
            **response_header(response),
            **reply_extras(response),
            usage=usage_of(field(response, "usage"), reasoning=0),
            message=ResponseMessage(
                content=field(choice, "text", ""),
                finish_reason=finish_of(choice) if finish_of(choice) != "tool_calls" else None,
                is_truncated=field(choice, "finish_reason") == "length",
                tokens=tokens_of(response, "completion"),
            ),
        )
