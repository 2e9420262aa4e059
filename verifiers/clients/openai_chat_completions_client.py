"""``vf.OpenAIChatCompletionsClient``: the chat-completions API as a ``vf.Client``.

The native client is a plain ``openai.AsyncOpenAI`` or any object with
``chat.completions.create`` (called through its own method), or, built from a ``ClientConfig`` or
a base URL, this SDK's lean HTTP transport (``OpenAICompatibleClient``: the same requests, a
fraction of the client CPU). Either way the request is what verifiers 0.1.11+ sends and the reply
becomes a ``vf.Response`` with token ids and logprobs when the server returns them.
"""

from __future__ import annotations

import os
from typing import Any, ClassVar

from verifiers.clients.client import Client, NativePromptT, NativeToolT
from verifiers.clients.config import ClientConfig, resolve_client_config
from verifiers.clients.http_client import OpenAICompatibleClient
from verifiers.clients.responses import field, first_choice, response_tokens
from verifiers.clients.retry import RetryPolicy
from verifiers.errors import EmptyModelResponseError, InvalidModelResponseError
from verifiers.messages.convert import to_wire, tool_call_from_raw, wire_tool
from verifiers.messages.models import (
    Messages,
    Response,
    ResponseMessage,
    ResponseTokens,
    Tool,
    ToolCall,
    Usage,
)
from verifiers.types import ClientType, MessageType, SamplingArgs

REASONING_FIELDS = ("reasoning_content", "reasoning")


def transport_from_config(config: ClientConfig) -> OpenAICompatibleClient:
    """The lean HTTP transport for one endpoint of ``config`` (its key read from the named
    environment variable, never stored in the config)."""
    resolved = resolve_client_config(config)
    return OpenAICompatibleClient(
        resolved.api_base_url,
        os.environ.get(resolved.api_key_var) or None,
        headers=dict(resolved.extra_headers),
        timeout=resolved.timeout,
        retry=RetryPolicy(max_retries=max(resolved.max_retries, 0)),
    )


def transport(native: Any) -> Any:
    """What sends the requests for a native client object: the lean transport for a plain
    ``AsyncOpenAI`` or a URL, the object's own methods otherwise (``verifiers.clients``)."""
    from verifiers.clients import model_client

    return model_client(native)


def content_text(content: Any) -> str:
    """All text of a message content (a string, or a list of parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if field(part, "type") == "text" and isinstance(field(part, "text"), str):
                texts.append(field(part, "text"))
        return " ".join(texts).strip()
    return ""


def reasoning_of(message: Any) -> str | None:
    for name in REASONING_FIELDS:
        value = field(message, name)
        if isinstance(value, str) and value:
            return value
    details = field(message, "reasoning_details")
    if isinstance(details, list) and details:
        return ""  # structured provider reasoning: keep a marker that it happened
    return None


def reasoning_tokens(usage: Any) -> int:
    value = field(field(usage, "completion_tokens_details"), "reasoning_tokens", 0)
    return value if isinstance(value, int) else 0


def usage_of(usage: Any, reasoning: int | None = None) -> Usage | None:
    if usage is None:
        return None
    prompt, completion = field(usage, "prompt_tokens"), field(usage, "completion_tokens")
    if not isinstance(prompt, int) or not isinstance(completion, int):
        prompt, completion = field(usage, "input_tokens"), field(usage, "output_tokens")
    if not isinstance(prompt, int) or not isinstance(completion, int):
        return None
    total = field(usage, "total_tokens")
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        reasoning_tokens=reasoning_tokens(usage) if reasoning is None else reasoning,
        total_tokens=total if isinstance(total, int) else prompt + completion,
    )


def finish_of(choice: Any) -> Any:
    reason = field(choice, "finish_reason")
    return reason if reason in ("stop", "length", "tool_calls") else None


def tokens_of(native: Any, message_type: MessageType) -> ResponseTokens | None:
    tokens = response_tokens(native, message_type)
    if tokens is None:
        return None
    return ResponseTokens(
        prompt_ids=tokens["prompt_ids"],
        prompt_mask=tokens["prompt_mask"],
        completion_ids=tokens["completion_ids"],
        completion_mask=tokens["completion_mask"],
        completion_logprobs=tokens["completion_logprobs"],
        routed_experts=field(first_choice(native), "routed_experts"),
    )


def response_header(native: Any) -> dict[str, Any]:
    """``id``, ``created`` and ``model`` of a reply, with safe defaults."""
    rid, created, model = (
        field(native, "id", ""),
        field(native, "created", 0),
        field(native, "model", ""),
    )
    return {
        "id": rid if isinstance(rid, str) else "",
        "created": created if isinstance(created, int) else 0,
        "model": model if isinstance(model, str) else "",
    }


STANDARD_REPLY_FIELDS = frozenset(
    {"id", "object", "created", "model", "usage", "choices", "system_fingerprint", "prompt_token_ids"}
)


def reply_extras(native: Any) -> dict[str, Any]:
    """A reply's non-standard top-level fields (``policy_version``, vendor fields), kept on the
    ``vf.Response`` so nothing the server said is lost."""
    if isinstance(native, dict):
        data = native
    else:
        data = getattr(native, "model_extra", None) or {}
    return {k: v for k, v in data.items() if k not in STANDARD_REPLY_FIELDS}


def only_choice(response: Any) -> Any:
    """The reply's one choice, as the chat-completions and completions clients both require: no
    reply or no choices is an empty reply, more than one choice an invalid one."""
    if response is None:
        raise EmptyModelResponseError("Model returned no response")
    choices = field(response, "choices")
    if choices is None:
        raise EmptyModelResponseError("Model returned no response choices")
    if len(choices) != 1:
        raise InvalidModelResponseError(f"Model returned {len(choices)} choices, expected 1")
    return choices[0]


def chat_sampling_args(sampling_args: SamplingArgs) -> SamplingArgs:
    """Sampling args as chat completions takes them (``max_tokens`` → ``max_completion_tokens``)."""
    args = {k: v for k, v in dict(sampling_args or {}).items() if v is not None}
    if "max_tokens" in args:
        args["max_completion_tokens"] = args.pop("max_tokens")
    return args


class OpenAIEndpointClient(Client[Any, NativePromptT, Any, NativeToolT]):
    """How every OpenAI-compatible client (chat completions, completions, Responses) is made
    and closed, in one place: no argument is a default ``ClientConfig`` of ``CLIENT_TYPE``, a
    string is a base URL for the lean transport, a config builds that transport; anything else
    is the native client itself. ``close`` closes what sends the requests."""

    CLIENT_TYPE: ClassVar[ClientType] = "openai_chat_completions"

    def __init__(self, client_or_config: Any = None) -> None:
        if client_or_config is None:
            client_or_config = ClientConfig(client_type=self.CLIENT_TYPE)
        if isinstance(client_or_config, str):
            client_or_config = OpenAICompatibleClient(client_or_config)
        super().__init__(client_or_config)
        self._transport = self.sender()

    def sender(self) -> Any:
        """What sends the requests: the lean transport for the native client (``transport``)."""
        return transport(self._client)

    def setup_client(self, config: ClientConfig) -> OpenAICompatibleClient:
        return transport_from_config(config)

    async def close(self) -> None:
        closer = getattr(self._transport, "aclose", None)
        if closer is not None:
            await closer()


class OpenAIChatCompletionsClient(OpenAIEndpointClient[list[dict[str, Any]], dict[str, Any]]):
    """``/chat/completions`` (see the module docstring)."""

    CLIENT_TYPE = "openai_chat_completions"

    async def to_native_prompt(
        self, messages: Messages
    ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        return to_wire(messages), {}

    async def to_native_tool(self, tool: Tool) -> dict[str, Any]:
        return wire_tool(tool)

    async def get_native_response(
        self,
        prompt: list[dict[str, Any]],
        model: str,
        sampling_args: SamplingArgs,
        tools: list[dict[str, Any]] | None = None,
        **kwargs: Any,
    ) -> Any:
        return await self._transport.chat(
            model=model,
            messages=prompt,
            tools=tools or None,
            sampling_args=chat_sampling_args(sampling_args),
            headers=kwargs.get("extra_headers") or None,
        )

    async def raise_from_native_response(self, response: Any) -> None:
        message = field(only_choice(response), "message")
        has_content = bool(content_text(field(message, "content")) or field(message, "refusal"))
        has_tools = bool(field(message, "tool_calls"))
        has_reasoning = (
            reasoning_of(message) is not None or reasoning_tokens(field(response, "usage")) > 0
        )
        if not (has_content or has_tools or has_reasoning):
            raise EmptyModelResponseError("Model returned no content and did not call any tools")

    async def from_native_response(self, response: Any) -> Response:
        choice = first_choice(response)
        message = field(choice, "message")
        content = field(message, "content")
        if not content_text(content):
            refusal = field(message, "refusal")
            content = refusal if isinstance(refusal, str) and refusal else None
        calls = [tool_call_from_raw(c) for c in field(message, "tool_calls") or []]
        calls = [c for c in calls if isinstance(c, ToolCall)]
        reasoning = reasoning_of(message)
        if (
            content is None
            and reasoning is None
            and not calls
            and reasoning_tokens(field(response, "usage"))
        ):
            content = ""
        return Response(
            **response_header(response),
            **reply_extras(response),
            usage=usage_of(field(response, "usage")),
            message=ResponseMessage(
                content=content,
                reasoning_content=reasoning,
                tool_calls=calls or None,
                finish_reason=finish_of(choice),
                is_truncated=field(choice, "finish_reason") == "length",
                tokens=tokens_of(response, "chat"),
            ),
        )
