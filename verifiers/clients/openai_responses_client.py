"""``vf.OpenAIResponsesClient``: OpenAI's Responses API (``/responses``) as a ``vf.Client``.

A conversation becomes input items: ``message`` items for system/user/assistant text,
``function_call`` items for the assistant's tool calls and ``function_call_output`` items for tool
results. The reply's output items become one assistant message; they are also kept on it
(``openai_responses_output``) and replayed as they were on the next turn, so reasoning items the
server returned are passed back. The native client is a plain ``openai.AsyncOpenAI`` (its
``responses.create``) or this SDK's lean transport (from a ``ClientConfig`` or a base URL).
"""

from __future__ import annotations

from typing import Any

from verifiers.clients.http_client import post_or_create
from verifiers.clients.openai_chat_completions_client import (
    OpenAIEndpointClient,
    content_text,
)
from verifiers.clients.responses import field
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

OUTPUT_FIELD = "openai_responses_output"


def _part(part: Any) -> dict[str, Any]:
    """One content part in the Responses input shape."""
    data = part.model_dump(exclude_none=True) if isinstance(part, MessageModel) else dict(part)
    kind = data.get("type")
    if kind == "text":
        return {"type": "input_text", "text": data.get("text", "")}
    if kind == "image_url":
        source = data.get("image_url") or {}
        url = source.get("url") if isinstance(source, dict) else source
        return {"type": "input_image", "image_url": url, "detail": "auto"}
    if kind == "input_audio":
        raise ValueError("The Responses API client does not take input_audio content parts")
    return data


def _content(content: Any) -> Any:
    if isinstance(content, list):
        return [_part(p) for p in content]
    return "" if content is None else content if isinstance(content, str) else str(content)


def input_items(messages: Messages) -> list[dict[str, Any]]:
    """A conversation as Responses API input items."""
    items: list[dict[str, Any]] = []
    for message in messages:
        role = message_role(message)
        if role in ("system", "user", "text"):
            items.append(
                {
                    "type": "message",
                    "role": "user" if role == "text" else role,
                    "content": _content(message_field(message, "content")),
                }
            )
        elif role == "tool":
            output = message_field(message, "content", "")
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": message_field(message, "tool_call_id", ""),
                    "output": output if isinstance(output, str) else _content(output),
                }
            )
        elif role == "assistant":
            replay = message_field(message, OUTPUT_FIELD)
            if replay:
                items.extend(dict(item) for item in replay)
                continue
            content = message_field(message, "content")
            if content_text(content) or content == "":
                items.append({"type": "message", "role": "assistant", "content": _content(content)})
            for call in message_field(message, "tool_calls") or []:
                call = tool_call_from_raw(call)
                items.append(
                    {
                        "type": "function_call",
                        "call_id": call.id,
                        "name": call.name,
                        "arguments": call.arguments,
                    }
                )
        else:
            raise ValueError(f"cannot send a {role!r} message to the Responses API")
    return items


def responses_sampling_args(sampling_args: SamplingArgs) -> dict[str, Any]:
    args = {k: v for k, v in dict(sampling_args or {}).items() if v is not None}
    if args.pop("n", 1) not in (None, 1):
        raise ValueError("The Responses API client takes n=1 only")
    max_tokens = args.pop("max_tokens", None)
    max_completion = args.pop("max_completion_tokens", None)
    if "max_output_tokens" not in args and (max_tokens or max_completion) is not None:
        args["max_output_tokens"] = max_tokens if max_tokens is not None else max_completion
    if args.get("stop") is not None:
        raise ValueError("The Responses API does not take stop sequences")
    args.pop("stop", None)
    args.pop("modalities", None)
    return args


def _items(response: Any) -> list[Any]:
    return list(field(response, "output", []) or [])


def _calls(response: Any) -> list[ToolCall]:
    calls = []
    for item in _items(response):
        if field(item, "type") == "function_call":
            call_id, name, arguments = (
                field(item, "call_id"),
                field(item, "name"),
                field(item, "arguments"),
            )
            if isinstance(call_id, str) and isinstance(name, str) and isinstance(arguments, str):
                calls.append(ToolCall(id=call_id, name=name, arguments=arguments))
    return calls


def _text(response: Any) -> str | None:
    chunks = []
    for item in _items(response):
        if field(item, "type") != "message":
            continue
        for part in field(item, "content", []) or []:
            kind = field(part, "type")
            if kind == "output_text" and isinstance(field(part, "text"), str):
                chunks.append(field(part, "text"))
            elif kind == "refusal" and isinstance(field(part, "refusal"), str):
                chunks.append(field(part, "refusal"))
    return "".join(chunks) or None


def _reasoning(response: Any) -> str | None:
    chunks = []
    for item in _items(response):
        if field(item, "type") != "reasoning":
            continue
        for piece in [*(field(item, "summary", []) or []), *(field(item, "content", []) or [])]:
            if isinstance(field(piece, "text"), str):
                chunks.append(field(piece, "text"))
    return "\n".join(chunks) or None


def _reasoning_tokens(usage: Any) -> int:
    value = field(field(usage, "output_tokens_details"), "reasoning_tokens", 0)
    return value if isinstance(value, int) else 0


class OpenAIResponsesClient(OpenAIEndpointClient[list[dict[str, Any]], dict[str, Any]]):
    """``/responses`` (see the module docstring)."""

    CLIENT_TYPE = "openai_responses"

    def sender(self) -> Any:
        """The native client itself: ``/responses`` goes through its ``responses.create`` (or the
        lean transport's ``post``), never the chat-completions transport."""
        return self._client

    async def to_native_prompt(
        self, messages: Messages
    ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        return input_items(messages), {}

    async def to_native_tool(self, tool: Tool) -> dict[str, Any]:
        native: dict[str, Any] = {
            "type": "function",
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        }
        if tool.strict is not None:
            native["strict"] = tool.strict
        return native

    async def get_native_response(
        self,
        prompt: list[dict[str, Any]],
        model: str,
        sampling_args: SamplingArgs,
        tools: list[dict[str, Any]] | None = None,
        **kwargs: Any,
    ) -> Any:
        args = responses_sampling_args(sampling_args)
        extra_body = args.pop("extra_body", None) or {}
        headers = kwargs.get("extra_headers") or None
        body: dict[str, Any] = {"model": model, "input": prompt, **args}
        if tools:
            body["tools"] = tools
        return await post_or_create(
            self._client, "/responses", "responses", body, extra_body, headers
        )

    async def raise_from_native_response(self, response: Any) -> None:
        if response is None:
            raise EmptyModelResponseError("Model returned no response")
        error = field(response, "error")
        if error:
            raise InvalidModelResponseError(str(field(error, "message", "Model response failed")))
        output = field(response, "output")
        reasoned = _reasoning_tokens(field(response, "usage")) > 0
        if output is None and not reasoned:
            raise EmptyModelResponseError("Model returned no output")
        if not (
            _text(response)
            or _calls(response)
            or _reasoning(response)
            or reasoned
            or any(field(i, "type") == "reasoning" for i in _items(response))
        ):
            raise EmptyModelResponseError("Model returned no content and did not call any tools")

    async def from_native_response(self, response: Any) -> Response:
        calls = _calls(response)
        truncated = field(response, "status") == "incomplete" or bool(
            field(response, "incomplete_details")
        )
        finish = (
            "tool_calls"
            if calls
            else "length"
            if truncated
            else ("stop" if field(response, "status") == "completed" else None)
        )
        usage = field(response, "usage")
        prompt, completion = field(usage, "input_tokens"), field(usage, "output_tokens")
        raw_items = [
            i.model_dump(exclude_none=True) if hasattr(i, "model_dump") else dict(i)
            for i in _items(response)
        ]
        content, reasoning = _text(response), _reasoning(response)
        if not raw_items and content is None and reasoning is None and _reasoning_tokens(usage):
            content = ""
        created = field(response, "created_at", 0)
        return Response(
            id=str(field(response, "id", "")),
            created=int(created) if isinstance(created, int | float) else 0,
            model=str(field(response, "model", "")),
            usage=Usage(
                prompt_tokens=prompt,
                completion_tokens=completion,
                reasoning_tokens=_reasoning_tokens(usage),
                total_tokens=field(usage, "total_tokens", prompt + completion),
            )
            if isinstance(prompt, int) and isinstance(completion, int)
            else None,
            message=ResponseMessage.model_validate(
                {
                    "content": content,
                    "reasoning_content": reasoning,
                    "tool_calls": calls or None,
                    "finish_reason": finish,
                    "is_truncated": truncated,
                    "tokens": None,
                    OUTPUT_FIELD: raw_items,
                }
            ),
        )


__all__ = ["OUTPUT_FIELD", "OpenAIResponsesClient", "input_items"]
