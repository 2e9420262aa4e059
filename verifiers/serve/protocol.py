"""Request models of the OpenAI-compatible API (the subset the server implements, validated).

Every list a request may carry is counted before its items are validated, against the served
model's context (``model_validate(..., context={"max_items": max_model_len})``): a conversation
with more messages, content parts, tool calls or tools than the context has tokens cannot be a
prompt for it, and refusing it costs a ``len`` where validating and rendering it would cost
seconds of the prompt lane. Before that, :func:`check_brackets` bounds what parsing the body can
cost: millions of tiny arrays hold the JSON parser, and the lane that parses them, for seconds. Stop strings are few and short, as OpenAI's are: they stay in memory
(and are searched for) while the request generates.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from verifiers.asgi.json_api import APIError

MAX_STOPS = 8
MAX_STOP_CHARS = 256
STRUCTURE_PER_ITEM = 16  # arrays and objects a message, part, tool call or tool may take


def check_brackets(body: bytes, max_model_len: int, max_prompt_chars: int) -> None:
    """Refuse, before parsing, a body with more ``[`` and ``{`` than a request for this model
    can need: those in its prompt text (at most ``max_prompt_chars``, what the context holds)
    and its structure (a few per message, part, tool call or tool, of which there are at most
    ``max_model_len``). Only these bytes open the arrays and objects a parser builds, so the
    count bounds that work, at the cost of a ``bytes.count``."""
    limit = max_prompt_chars + STRUCTURE_PER_ITEM * max_model_len
    found = body.count(b"[") + body.count(b"{")
    if found > limit:
        raise APIError(
            400,
            f"this body has {found} '[' and '{{' (JSON arrays and objects, or brackets in its "
            f"text); a request for this model's context of {max_model_len} tokens has at most "
            f"{limit}",
        )


def _count(info: ValidationInfo, found: int, what: str) -> None:
    """Refuse more ``what`` than ``info.context["max_items"]`` (the served context, in tokens)."""
    limit = (info.context or {}).get("max_items")
    if limit is not None and found > limit:
        raise ValueError(
            f"this request has {found} {what}; a prompt for this model's context of {limit} "
            f"tokens has at most {limit}"
        )


class _Sampling(BaseModel):
    # Unknown OpenAI fields (user, frequency_penalty, ...) are accepted and ignored, as vLLM
    # does, and not kept: a request holds only what it uses while it generates.
    model_config = ConfigDict(extra="ignore")

    model: str
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    temperature: float = Field(default=1.0, ge=0.0, le=2.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    top_k: int = Field(default=0, ge=-1)
    n: int = Field(default=1, ge=1, le=16)
    stop: str | list[str] | None = Field(default=None, validate_default=True)
    seed: int | None = None
    stream: bool = False
    stream_options: dict[str, Any] | None = None
    return_token_ids: bool = False
    ignore_eos: bool = False

    @field_validator("stop", mode="before")
    @classmethod
    def _stops(cls, value: Any) -> Any:
        """Up to 8 non-empty strings of up to 256 characters, counted before anything else."""
        if value is None:
            return []
        stops = [value] if isinstance(value, str) else value
        if isinstance(stops, list) and not (
            len(stops) <= MAX_STOPS
            and all(isinstance(s, str) and 0 < len(s) <= MAX_STOP_CHARS for s in stops)
        ):
            raise ValueError(
                f"stop must be up to {MAX_STOPS} non-empty strings of up to {MAX_STOP_CHARS} "
                "characters"
            )
        return stops

    @property
    def limit(self) -> int | None:
        return self.max_completion_tokens or self.max_tokens

    @property
    def stream_usage(self) -> bool:
        return bool((self.stream_options or {}).get("include_usage"))


class ChatCompletionRequest(_Sampling):
    messages: list[dict[str, Any]] = Field(min_length=1)
    logprobs: bool = False
    top_logprobs: int | None = Field(default=None, ge=0, le=20)
    tools: list[dict[str, Any]] | None = None
    tool_choice: Any = None

    @field_validator("messages", mode="before")
    @classmethod
    def _few_messages(cls, messages: Any, info: ValidationInfo) -> Any:
        if isinstance(messages, list):
            _count(info, len(messages), "messages")
            parts = calls = 0
            for message in messages:
                if isinstance(message, dict):
                    content, tool_calls = message.get("content"), message.get("tool_calls")
                    parts += len(content) if isinstance(content, list) else 0
                    calls += len(tool_calls) if isinstance(tool_calls, list) else 0
            _count(info, parts, "content parts")
            _count(info, calls, "tool calls")
        return messages

    @field_validator("tools", mode="before")
    @classmethod
    def _few_tools(cls, tools: Any, info: ValidationInfo) -> Any:
        if isinstance(tools, list):
            _count(info, len(tools), "tools")
        return tools

    @field_validator("messages")
    @classmethod
    def _roles(cls, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for i, message in enumerate(messages):
            if message.get("role") not in ("system", "user", "assistant", "tool", "developer"):
                raise ValueError(f"messages[{i}] has no valid role")
            content = message.get("content")
            if not (
                content is None
                or isinstance(content, str)
                or (isinstance(content, list) and all(_is_part(p) for p in content))
            ):
                raise ValueError(
                    f"messages[{i}].content must be a string, a list of parts "
                    '({"type": "text", "text": "..."}) or null'
                )
            calls = message.get("tool_calls")
            if calls is not None and not isinstance(calls, list):
                raise ValueError(f"messages[{i}].tool_calls must be a list")
            for j, call in enumerate(calls or []):
                function = call.get("function") if isinstance(call, dict) else None
                if not (
                    isinstance(function, dict)
                    and isinstance(function.get("name"), str)
                    and isinstance(function.get("arguments", "{}"), str | dict)
                ):
                    raise ValueError(
                        f"messages[{i}].tool_calls[{j}] must be "
                        '{"function": {"name": "...", "arguments": "<JSON text or object>"}}'
                    )
        return messages

    def reply(self) -> Reply:
        return Reply(
            stream=self.stream,
            logprobs=self.logprobs,
            top_logprobs=(self.top_logprobs or 0) if self.logprobs else 0,
            return_token_ids=self.return_token_ids,
            stream_usage=self.stream_usage,
            tool_calls=bool(self.tools),
        )


def _is_part(part: Any) -> bool:
    return isinstance(part, dict) and isinstance(part.get("text", ""), str)


class CompletionRequest(_Sampling):
    prompt: str | list[int]
    logprobs: int | None = Field(default=None, ge=0, le=20)
    echo: Literal[False] = False

    @field_validator("prompt", mode="before")
    @classmethod
    def _few_ids(cls, prompt: Any, info: ValidationInfo) -> Any:
        if isinstance(prompt, list):
            _count(info, len(prompt), "prompt token ids")
        return prompt

    def reply(self) -> Reply:
        return Reply(
            stream=self.stream,
            logprobs=self.logprobs is not None,
            top_logprobs=self.logprobs or 0,
            return_token_ids=self.return_token_ids,
            stream_usage=self.stream_usage,
            tool_calls=False,
        )


@dataclass(frozen=True)
class Reply:
    """What answering a request needs once its prompt is tokenized: the parsed body (up to 32
    MiB of JSON, many times that as objects) is dropped then, not held while it generates."""

    stream: bool
    logprobs: bool
    top_logprobs: int
    return_token_ids: bool
    stream_usage: bool
    tool_calls: bool


@dataclass
class SamplingParams:
    """How the engine samples one request's sequences (from the request's fields)."""

    max_tokens: int = 256
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    stop: list[str] = field(default_factory=list)
    seed: int | None = None
    top_logprobs: int = 0
    ignore_eos: bool = False
