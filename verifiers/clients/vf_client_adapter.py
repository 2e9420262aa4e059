"""A ``vf.Client`` used where the dict-era engine expects a ``ModelClient``.

Environments of verifiers 0.1.x before 0.1.11 read replies as chat-completion JSON
(``state["responses"][-1].choices[0].message.content``); when such an environment is run with a
``vf.Client`` (an Anthropic client, a Responses client, a config), its ``vf.Response`` is given
back in that shape, token ids and logprobs included.
"""

from __future__ import annotations

from typing import Any

from verifiers.messages.convert import normalize_messages, tool_from_raw, wire_tool_call
from verifiers.messages.models import Response, TextMessage
from verifiers.types import ModelResponse


def chat_completion_dict(response: Response, message_type: str = "chat") -> ModelResponse:
    """A ``vf.Response`` as an OpenAI chat-completion (or text-completion) reply."""
    message = response.message
    choice: dict[str, Any] = {"index": 0, "finish_reason": message.finish_reason or "stop"}
    if message_type == "completion":
        choice["text"] = message.content if isinstance(message.content, str) else ""
    else:
        wire: dict[str, Any] = {"role": "assistant", "content": message.content}
        if message.tool_calls:
            wire["tool_calls"] = [wire_tool_call(c) for c in message.tool_calls]
        if message.reasoning_content is not None:
            wire["reasoning_content"] = message.reasoning_content
        choice["message"] = wire
    out: dict[str, Any] = {
        "id": response.id,
        "object": "chat.completion" if message_type != "completion" else "text_completion",
        "created": response.created,
        "model": response.model,
        "choices": [choice],
    }
    if response.usage is not None:
        out["usage"] = {
            "prompt_tokens": response.usage.prompt_tokens,
            "completion_tokens": response.usage.completion_tokens,
            "total_tokens": response.usage.total_tokens,
        }
    tokens = message.tokens
    if tokens is not None:
        out["prompt_token_ids"] = list(tokens.prompt_ids)
        choice["token_ids"] = list(tokens.completion_ids)
        choice["logprobs"] = {
            "content": [{"token": "", "logprob": lp} for lp in tokens.completion_logprobs]
        }
    return ModelResponse(out)


class VFClientAdapter:
    """``chat``/``complete`` over ``vf.Client.get_response``."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.base_url = getattr(client, "base_url", "")

    async def chat(
        self,
        *,
        model: str,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        sampling_args: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> ModelResponse:
        response = await self.client.get_response(
            prompt=normalize_messages(messages),
            model=model,
            sampling_args=dict(sampling_args or {}),
            tools=[tool_from_raw(t) for t in tools] if tools else None,
            **({"extra_headers": headers} if headers else {}),
        )
        return chat_completion_dict(response)

    async def complete(
        self,
        *,
        model: str,
        prompt: str,
        sampling_args: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> ModelResponse:
        response = await self.client.get_response(
            prompt=[TextMessage(content=prompt)],
            model=model,
            sampling_args=dict(sampling_args or {}),
            **({"extra_headers": headers} if headers else {}),
        )
        return chat_completion_dict(response, "completion")

    async def aclose(self) -> None:
        return None  # the vf.Client belongs to whoever passed it
