"""The one layer through which rollouts talk to a model.

``ModelClient`` is the interface; ``OpenAICompatibleClient`` speaks the OpenAI HTTP API. A plain
``openai.AsyncOpenAI``/``OpenAI`` (exactly that class, its own HTTP client, no default query) is
provably equivalent to the lean client with the same URL, key, headers, timeout and retries, so it
takes that fast lane; any other client object (a subclass, Azure, a custom ``http_client``, a
test double) is called through its own ``chat.completions.create`` (``SDKClient``).
"""

from __future__ import annotations

import weakref
from typing import Any, Protocol, runtime_checkable

from verifiers.clients.http_client import OpenAICompatibleClient
from verifiers.clients.retry import NO_RETRY, RetryPolicy
from verifiers.clients.sdk_client import SDKClient
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


_from_openai: weakref.WeakKeyDictionary[Any, ModelClient] = weakref.WeakKeyDictionary()


def resolve_client(client: Any, retry: RetryPolicy | None = None) -> ModelClient:
    """Turn whatever the user passed (a ModelClient, an openai client, a base URL) into a ModelClient."""
    if isinstance(client, ModelClient):
        return client
    if isinstance(client, str):
        return OpenAICompatibleClient(client, retry=retry)
    chat = getattr(getattr(client, "chat", None), "completions", None)
    if _is_plain_openai(client) or hasattr(chat, "create"):
        try:
            cached = _from_openai.get(client)
        except TypeError:  # not weak-referenceable
            cached = None
        if cached is None:
            cached = (
                _from_openai_sdk(client, retry) if _is_plain_openai(client) else SDKClient(client)
            )
            try:
                _from_openai[client] = cached
            except TypeError:
                pass
        return cached
    raise TypeError(
        f"expected an openai.AsyncOpenAI (or any object with chat.completions.create), a verifiers "
        f"ModelClient or a base URL, got {type(client).__name__}"
    )


def _is_plain_openai(client: Any) -> bool:
    """True for an unmodified ``openai.AsyncOpenAI``/``OpenAI``: the lean client is equivalent."""
    try:
        import openai
        from openai._base_client import AsyncHttpxClientWrapper, SyncHttpxClientWrapper
    except ImportError:  # pragma: no cover
        return False
    if type(client) is openai.AsyncOpenAI:
        wrapper: type = AsyncHttpxClientWrapper
    elif type(client) is openai.OpenAI:
        wrapper = SyncHttpxClientWrapper
    else:
        return False
    return type(getattr(client, "_client", None)) is wrapper and not getattr(
        client, "_custom_query", None
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


__all__ = [
    "NO_RETRY",
    "ModelClient",
    "OpenAICompatibleClient",
    "RetryPolicy",
    "SDKClient",
    "resolve_client",
]
