"""Request models of the OpenAI-compatible API (the subset the server implements, validated)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator


class _Sampling(BaseModel):
    # Unknown OpenAI fields (user, frequency_penalty, ...) are accepted and ignored, as vLLM does.
    model_config = ConfigDict(extra="allow")

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

    @field_validator("stop")
    @classmethod
    def _stops(cls, value: str | list[str] | None) -> list[str]:
        if value is None:
            return []
        stops = [value] if isinstance(value, str) else value
        if len(stops) > 8 or any(not s for s in stops):
            raise ValueError("stop must be up to 8 non-empty strings")
        return stops

    @property
    def limit(self) -> int | None:
        return self.max_completion_tokens or self.max_tokens


class ChatCompletionRequest(_Sampling):
    messages: list[dict[str, Any]] = Field(min_length=1)
    logprobs: bool = False
    top_logprobs: int | None = Field(default=None, ge=0, le=20)
    tools: list[dict[str, Any]] | None = None
    tool_choice: Any = None

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
                or (isinstance(content, list) and all(isinstance(p, dict) for p in content))
            ):
                raise ValueError(f"messages[{i}].content must be a string, a list of parts or null")
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


class CompletionRequest(_Sampling):
    prompt: str | list[int]
    logprobs: int | None = Field(default=None, ge=0, le=20)
    echo: Literal[False] = False
