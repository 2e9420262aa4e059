"""``vf.AnthropicMessagesClient``: Anthropic's Messages API (``/v1/messages``) as a ``vf.Client``.

System messages become the ``system`` field; tool calls become ``tool_use`` blocks and tool
results ``tool_result`` blocks in a user turn (consecutive results share one turn, as the API
requires); thinking blocks the model returned are sent back with its turn. The reply's text,
thinking and ``tool_use`` blocks become one assistant message. The native client is an
``anthropic.AsyncAnthropic`` (its ``messages.create``) or this SDK's lean transport, which
authenticates with ``x-api-key`` and ``anthropic-version`` as the API does.
"""

from __future__ import annotations

import json
import os
from typing import Any

from verifiers.clients.client import Client
from verifiers.clients.config import ClientConfig, resolve_client_config
from verifiers.clients.http_client import OpenAICompatibleClient, post_or_create
from verifiers.clients.openai_chat_completions_client import content_text
from verifiers.clients.responses import field
from verifiers.clients.retry import RetryPolicy
from verifiers.errors import EmptyModelResponseError, InvalidModelResponseError
from verifiers.messages.convert import message_field, message_role, tool_call_from_raw
from verifiers.messages.models import (
    MessageModel,
    Messages,
    Response,
    ResponseMessage,
    Tool,
    ToolCall,
    Usage,
)
from verifiers.types import SamplingArgs

ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096  # the Messages API requires max_tokens; this is its usual default


def _block(part: Any) -> dict[str, Any]:
    data = part.model_dump(exclude_none=True) if isinstance(part, MessageModel) else dict(part)
    if data.get("type") == "image_url":
        url = (data.get("image_url") or {}).get("url", "")
        if url.startswith("data:") and ";base64," in url:
            media, payload = url[5:].split(";base64,", 1)
            return {
                "type": "image",
                "source": {"type": "base64", "media_type": media, "data": payload},
            }
        return {"type": "image", "source": {"type": "url", "url": url}}
    return data


def _content(content: Any) -> Any:
    if isinstance(content, list):
        return [_block(p) for p in content]
    return "" if content is None else content


def _arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw) if raw else {}
    except json.JSONDecodeError:
        return {"_raw": raw}
    return value if isinstance(value, dict) else {"_value": value}


def _thinking(message: Any) -> list[dict[str, Any]]:
    blocks = []
    for block in message_field(message, "thinking_blocks") or []:
        data = block if isinstance(block, dict) else getattr(block, "model_dump", dict)()
        if data.get("type") in ("thinking", "redacted_thinking"):
            blocks.append(dict(data))
    return blocks


def anthropic_prompt(messages: Messages) -> tuple[list[dict[str, Any]], str]:
    """A conversation as Messages API turns, and the joined system prompt."""
    system = [
        content_text(message_field(m, "content")) for m in messages if message_role(m) == "system"
    ]
    turns: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []

    def flush() -> None:
        if results:
            turns.append({"role": "user", "content": list(results)})
            results.clear()

    for message in messages:
        role = message_role(message)
        if role == "system":
            continue
        if role == "tool":
            content = message_field(message, "content", "")
            results.append(
                {
                    "type": "tool_result",
                    "tool_use_id": message_field(message, "tool_call_id", ""),
                    "content": content if isinstance(content, str) else _content(content),
                }
            )
            continue
        flush()
        if role in ("user", "text"):
            turns.append({"role": "user", "content": _content(message_field(message, "content"))})
        elif role == "assistant":
            calls = [tool_call_from_raw(c) for c in message_field(message, "tool_calls") or []]
            thinking = _thinking(message)
            content = message_field(message, "content")
            if calls or thinking:
                blocks = [*thinking]
                text = content_text(content)
                if text:
                    blocks.append({"type": "text", "text": text})
                blocks += [
                    {
                        "type": "tool_use",
                        "id": c.id,
                        "name": c.name,
                        "input": _arguments(c.arguments),
                    }
                    for c in calls
                ]
                turns.append({"role": "assistant", "content": blocks})
            else:
                turns.append(
                    {
                        "role": "assistant",
                        "content": content if isinstance(content, str) else content_text(content),
                    }
                )
        else:
            raise ValueError(f"cannot send a {role!r} message to the Anthropic Messages API")
    flush()
    return turns, "\n\n".join(s for s in system if s)


def messages_sampling_args(sampling_args: SamplingArgs) -> dict[str, Any]:
    args = {k: v for k, v in dict(sampling_args or {}).items() if v is not None}
    args.pop("n", None)
    max_tokens = args.pop("max_tokens", None) or args.pop("max_completion_tokens", None)
    args["max_tokens"] = max_tokens or DEFAULT_MAX_TOKENS
    if "stop" in args:
        stop = args.pop("stop")
        args["stop_sequences"] = [stop] if isinstance(stop, str) else list(stop)
    for unsupported in (
        "seed",
        "logprobs",
        "top_logprobs",
        "presence_penalty",
        "frequency_penalty",
    ):
        args.pop(unsupported, None)
    return args


class AnthropicMessagesClient(Client[Any, list[dict[str, Any]], Any, dict[str, Any]]):
    def __init__(self, client_or_config: Any = None) -> None:
        if client_or_config is None:
            client_or_config = ClientConfig(
                client_type="anthropic_messages", api_key_var="ANTHROPIC_API_KEY"
            )
        if isinstance(client_or_config, str):
            client_or_config = ClientConfig(
                client_type="anthropic_messages", api_base_url=client_or_config
            )
        super().__init__(client_or_config)

    def setup_client(self, config: ClientConfig) -> OpenAICompatibleClient:
        resolved = resolve_client_config(config)
        headers = {"anthropic-version": ANTHROPIC_VERSION, **resolved.extra_headers}
        key = os.environ.get(resolved.api_key_var)
        if key:
            headers["x-api-key"] = key
        return OpenAICompatibleClient(
            resolved.api_base_url,
            headers=headers,
            timeout=resolved.timeout,
            retry=RetryPolicy(max_retries=max(resolved.max_retries, 0)),
        )

    async def close(self) -> None:
        closer = getattr(self._client, "aclose", None)
        if closer is not None:
            await closer()

    async def to_native_prompt(
        self, messages: Messages
    ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        turns, system = anthropic_prompt(messages)
        return turns, ({"system": system} if system else {})

    async def to_native_tool(self, tool: Tool) -> dict[str, Any]:
        return {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}

    async def get_native_response(
        self,
        prompt: list[dict[str, Any]],
        model: str,
        sampling_args: SamplingArgs,
        tools: list[dict[str, Any]] | None = None,
        **kwargs: Any,
    ) -> Any:
        args = messages_sampling_args(sampling_args)
        extra_body = args.pop("extra_body", None) or {}
        body: dict[str, Any] = {"model": model, "messages": prompt, **args}
        if kwargs.get("system"):
            body["system"] = kwargs["system"]
        if tools:
            body["tools"] = tools
        headers = kwargs.get("extra_headers") or None
        ours = isinstance(self._client, OpenAICompatibleClient)  # a vendor SDK's has its path
        path = "/messages" if ours and self._client.base_url.endswith("/v1") else "/v1/messages"
        return await post_or_create(self._client, path, "messages", body, extra_body, headers)

    async def raise_from_native_response(self, response: Any) -> None:
        if response is None:
            raise EmptyModelResponseError("Model returned no response")
        if field(response, "type") == "error":
            raise InvalidModelResponseError(
                str(field(field(response, "error"), "message", "error"))
            )
        blocks = field(response, "content")
        if blocks is None:
            raise EmptyModelResponseError("Model returned no content")
        useful = any(
            (field(b, "type") == "text" and field(b, "text"))
            or field(b, "type") in ("tool_use", "thinking", "redacted_thinking")
            for b in blocks
        )
        if not useful:
            raise EmptyModelResponseError("Model returned no content and did not call any tools")

    async def from_native_response(self, response: Any) -> Response:
        text, reasoning, calls, thinking = "", "", [], []
        for block in field(response, "content", []) or []:
            kind = field(block, "type")
            if kind == "text":
                text += field(block, "text", "")
            elif kind == "thinking":
                reasoning += field(block, "thinking", "")
                thinking.append(
                    {
                        "type": "thinking",
                        "thinking": field(block, "thinking", ""),
                        "signature": field(block, "signature", ""),
                    }
                )
            elif kind == "redacted_thinking":
                thinking.append({"type": "redacted_thinking", "data": field(block, "data", "")})
            elif kind == "tool_use":
                calls.append(
                    ToolCall(
                        id=str(field(block, "id", "")),
                        name=str(field(block, "name", "")),
                        arguments=json.dumps(field(block, "input", {}) or {}),
                    )
                )
        stop = field(response, "stop_reason")
        usage = field(response, "usage")
        prompt, completion = field(usage, "input_tokens"), field(usage, "output_tokens")
        return Response(
            id=str(field(response, "id", "")),
            created=0,
            model=str(field(response, "model", "")),
            usage=Usage(
                prompt_tokens=prompt,
                completion_tokens=completion,
                reasoning_tokens=0,
                total_tokens=prompt + completion,
            )
            if isinstance(prompt, int) and isinstance(completion, int)
            else None,
            message=ResponseMessage(
                content=text or None,
                reasoning_content=reasoning or None,
                thinking_blocks=thinking or None,
                tool_calls=calls or None,
                finish_reason={
                    "end_turn": "stop",
                    "stop_sequence": "stop",
                    "max_tokens": "length",
                    "tool_use": "tool_calls",
                }.get(stop),
                is_truncated=stop == "max_tokens",
                tokens=None,
            ),
        )


__all__ = ["AnthropicMessagesClient", "anthropic_prompt"]
