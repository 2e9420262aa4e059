"""From whatever the user passed (a client object, a base URL, a ``ClientConfig``) to the client
the engine calls: ``model_client`` (a ``ModelClient``, the dict era) and ``make_client`` (a
``vf.Client``, 0.1.11+), each cached per client object so a run reuses its connections.

A plain ``openai.AsyncOpenAI``/``OpenAI`` (exactly that class, its own HTTP client, no default
query) is provably equivalent to the lean client with the same URL, key, headers, timeout and
retries, so it takes that fast lane; any other client object (a subclass, Azure, a custom
``http_client``, a test double) is called through its own ``chat.completions.create``
(``SDKClient``).
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

from verifiers.clients.http_client import OpenAICompatibleClient
from verifiers.clients.protocol import ModelClient
from verifiers.clients.retry import RetryPolicy
from verifiers.clients.sdk_client import SDKClient

if TYPE_CHECKING:
    from verifiers.clients.client import Client


_from_openai: weakref.WeakKeyDictionary[Any, ModelClient] = weakref.WeakKeyDictionary()


def resolve_client(client: Any) -> Client:
    """A ``vf.Client`` for a ``vf.Client`` or a ``ClientConfig`` (the classic function), and for
    anything else ``make_client`` accepts."""
    return make_client(client)


def model_client(client: Any, retry: RetryPolicy | None = None) -> ModelClient:
    """Turn whatever the user passed (a ModelClient, an openai client, a base URL, a
    ``ClientConfig`` or a ``vf.Client``) into the ``ModelClient`` the dict-era engine calls."""
    from verifiers.clients.client import Client
    from verifiers.clients.config import ClientConfig

    if isinstance(client, ClientConfig):
        client = make_client(client)
    if isinstance(client, Client):
        from verifiers.clients.vf_client_adapter import VFClientAdapter

        return VFClientAdapter(client)
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


CLIENT_CLASSES: dict[str, tuple[str, str]] = {
    "openai_chat_completions": (
        "verifiers.clients.openai_chat_completions_client",
        "OpenAIChatCompletionsClient",
    ),
    "openai_completions": (
        "verifiers.clients.openai_completions_client",
        "OpenAICompletionsClient",
    ),
    "openai_responses": ("verifiers.clients.openai_responses_client", "OpenAIResponsesClient"),
    "anthropic_messages": (
        "verifiers.clients.anthropic_messages_client",
        "AnthropicMessagesClient",
    ),
}


def client_class(client_type: str) -> type[Client]:
    """The ``vf.Client`` class for a ``ClientConfig.client_type``."""
    import importlib

    if client_type not in CLIENT_CLASSES:
        supported = ", ".join(sorted(CLIENT_CLASSES))
        raise ValueError(
            f"client_type {client_type!r} is not supported by this SDK (supported: {supported})"
        )
    module, name = CLIENT_CLASSES[client_type]
    return getattr(importlib.import_module(module), name)


def make_client(client: Any, message_type: str = "chat") -> Client:
    """A ``vf.Client`` for whatever the user passed: itself, one built from a ``ClientConfig``
    (by its ``client_type``), or, for a base URL, an openai client or a ``ModelClient``, the
    chat-completions client (the completions client for ``message_type="completion"``)."""
    from verifiers.clients.client import Client
    from verifiers.clients.config import ClientConfig

    if isinstance(client, Client):
        return client
    if isinstance(client, ClientConfig):
        return client_class(client.client_type)(client)
    kind = "openai_completions" if message_type == "completion" else "openai_chat_completions"
    # a client seen before first: the protocol check below (a runtime ``isinstance`` against
    # ``ModelClient``) cost each model call of a rollout ~15 us; only clients that passed it
    # are cached
    cached = _typed_cache.get(client, kind) if not isinstance(client, str) else None
    if cached is not None:
        return cached
    if isinstance(client, str | ModelClient) or hasattr(client, "chat"):
        typed = client_class(kind)(client)
        if not isinstance(client, str):
            _typed_cache.put(client, kind, typed)
        return typed
    raise TypeError(
        f"expected a vf.Client, a ClientConfig, an openai.AsyncOpenAI, a ModelClient or a base "
        f"URL, got {type(client).__name__}"
    )


class _TypedCache:
    """One ``vf.Client`` per (client object, API kind), so a run reuses its connections."""

    def __init__(self) -> None:
        self._by_kind: dict[str, weakref.WeakKeyDictionary[Any, Any]] = {}

    def get(self, client: Any, kind: str) -> Any:
        try:
            return self._by_kind.get(kind, {}).get(client)
        except TypeError:
            return None

    def put(self, client: Any, kind: str, value: Any) -> None:
        try:
            self._by_kind.setdefault(kind, weakref.WeakKeyDictionary())[client] = value
        except TypeError:
            pass


_typed_cache = _TypedCache()
