"""The one layer through which rollouts talk to a model.

``ModelClient`` is the interface; ``OpenAICompatibleClient`` speaks the OpenAI HTTP API. An
``openai.AsyncOpenAI`` (or ``OpenAI``) passed by a user is read for its URL, key and headers and
served by the lean client, so environments written against the openai SDK run unchanged.
"""

from __future__ import annotations

import weakref
from typing import Any, Protocol, runtime_checkable

from verifiers.clients.http_client import OpenAICompatibleClient
from verifiers.clients.retry import NO_RETRY, RetryPolicy
from verifiers.types import ModelResponse


@runtime_checkable
class ModelClient(Protocol):
    async def chat(
        self,
        *,
        model: str,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        sampling_args: dict[str, Any] | None = None,
    ) -> ModelResponse: ...

    async def complete(
        self, *, model: str, prompt: str, sampling_args: dict[str, Any] | None = None
    ) -> ModelResponse: ...


_from_openai: weakref.WeakKeyDictionary[Any, OpenAICompatibleClient] = weakref.WeakKeyDictionary()


def resolve_client(client: Any, retry: RetryPolicy | None = None) -> ModelClient:
    """Turn whatever the user passed (a ModelClient, an openai client, a base URL) into a ModelClient."""
    if isinstance(client, ModelClient):
        return client
    if isinstance(client, str):
        return OpenAICompatibleClient(client, retry=retry)
    if hasattr(client, "base_url") and hasattr(client, "api_key"):
        cached = _from_openai.get(client)
        if cached is None:
            cached = _from_openai_sdk(client, retry)
            _from_openai[client] = cached
        return cached
    raise TypeError(
        f"expected an openai.AsyncOpenAI, a verifiers ModelClient or a base URL, got {type(client).__name__}"
    )


def _from_openai_sdk(client: Any, retry: RetryPolicy | None) -> OpenAICompatibleClient:
    headers = {
        str(k): str(v)
        for k, v in (getattr(client, "_custom_headers", None) or {}).items()
        if isinstance(v, str)
    }
    timeout = getattr(client, "timeout", None)
    seconds = getattr(timeout, "read", timeout)
    return OpenAICompatibleClient(
        str(client.base_url),
        client.api_key or None,
        headers=headers,
        timeout=float(seconds) if isinstance(seconds, int | float) else 600.0,
        retry=retry or RetryPolicy(max_retries=max(int(getattr(client, "max_retries", 3)), 0)),
    )


__all__ = ["NO_RETRY", "ModelClient", "OpenAICompatibleClient", "RetryPolicy", "resolve_client"]
