"""The OpenAI chat-completions wire: v1 messages and tools to request dicts and a completion
back to a v1 ``AssistantMessage``, and the ``AsyncOpenAI`` client of a ``BaseClientConfig``
(what a judge and the ``null`` harness call a model with), shared by the episodes of a run
inside ``pooled_clients()``.

``openai`` is imported only when an ``AsyncOpenAI`` or a ``ChatCompletion`` is made: its
types are some 80,000 objects that every full garbage collection of a run walks, and a run
whose episodes talk through the pooled lean client (``LeanChatClient.create_json``) needs
neither.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from contextvars import ContextVar, Token
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from verifiers.clients.responses import field
from verifiers.messages.convert import wire_tool
from verifiers.v1.configs.client import BaseClientConfig
from verifiers.v1.types import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)

if TYPE_CHECKING:
    from openai import AsyncOpenAI

CLIENT_TIMEOUT = 600.0

# One v1 tool as a chat-completions request tool: the classic clients' conversion, one copy.
tool_to_wire = wire_tool


def open_client(
    config: BaseClientConfig, base_url: str | None = None, api_key: str | None = None
) -> AsyncOpenAI:
    """A client for ``config``'s endpoint (``base_url`` and ``api_key`` fill in when the config names none).
    The key is read from the variable ``api_key_var`` names; a local endpoint needs none."""
    from openai import AsyncOpenAI

    return AsyncOpenAI(**_client_args(config, base_url, api_key))


def _client_args(
    config: BaseClientConfig, base_url: str | None, api_key: str | None
) -> dict[str, Any]:
    return {
        "base_url": config.base_url or base_url,
        "api_key": (api_key if config.base_url is None and api_key else None)
        or os.environ.get(config.api_key_var)
        or "EMPTY",
        "default_headers": config.headers or None,
        "timeout": CLIENT_TIMEOUT,
        "max_retries": 0,
    }


class LeanChatClient:
    """``chat.completions.create`` on the SDK's lean HTTP client (aiohttp and orjson, what a
    classic rollout's model calls use), for the episodes of a run. ``AsyncOpenAI`` spends more
    client CPU per request (its params transform and httpx) than the rest of a v1 rollout; the
    same body is sent, no retry is made (as ``open_client``'s ``max_retries=0``), and the reply
    is built into the same ``ChatCompletion`` the openai SDK returns. A request with
    openai-only options (``extra_query``, ``timeout``, ``stream``) goes through ``AsyncOpenAI``.
    """

    OPENAI_ONLY = frozenset({"extra_query", "timeout", "stream"})

    def __init__(self, args: dict[str, Any]) -> None:
        from verifiers.clients.http_client import OpenAICompatibleClient
        from verifiers.clients.retry import RetryPolicy

        self._args = args
        self._http = (
            OpenAICompatibleClient(
                args["base_url"],
                args["api_key"],
                headers=args["default_headers"],
                timeout=args["timeout"],
                retry=RetryPolicy(max_retries=0),
            )
            if args["base_url"]
            else None  # the openai SDK's own default endpoint (OPENAI_BASE_URL...)
        )
        self._openai: AsyncOpenAI | None = None
        self.chat = self  # ``client.chat.completions.create`` as on ``AsyncOpenAI``
        self.completions = self

    async def create(self, **request: Any) -> Any:
        """The reply as the ``ChatCompletion`` ``AsyncOpenAI`` returns."""
        from openai.types.chat import ChatCompletion

        if self._needs_openai(request):
            return await self._openai_client().chat.completions.create(**request)
        reply = await self._post(request)
        try:  # pydantic-core: a fifteenth of the CPU of the openai SDK's ``construct``
            return ChatCompletion.model_validate(reply)
        except ValidationError:  # a reply off the schema, kept as the openai SDK keeps it
            return ChatCompletion.construct(**reply)

    def create_json(self, **request: Any) -> Awaitable[Any]:
        """The reply as the server's JSON dict, what the ``null`` harness reads (no
        ``ChatCompletion`` is validated, so ``openai`` is not imported); for an openai-only
        request ``AsyncOpenAI``'s ``ChatCompletion``. ``message_from_completion``,
        ``Usage.from_openai`` and ``response_tokens`` read either. The request's awaitable
        itself, not a coroutine awaiting it: held across the model call, each layer was one
        more object per rollout for the collector to walk."""
        if self._needs_openai(request):
            return self._openai_client().chat.completions.create(**request)
        return self._post(request)

    def _needs_openai(self, request: dict[str, Any]) -> bool:
        return self._http is None or bool(self.OPENAI_ONLY.intersection(request))

    def _openai_client(self) -> AsyncOpenAI:
        if self._openai is None:
            from openai import AsyncOpenAI

            self._openai = AsyncOpenAI(**self._args)
        return self._openai

    def _post(self, request: dict[str, Any]) -> Awaitable[Any]:
        """The POST of ``request``'s body (built now), as the HTTP client's awaitable."""
        from verifiers.clients.http_client import build_body

        assert self._http is not None  # ``_needs_openai`` is false
        body = build_body(request["model"], {k: v for k, v in request.items() if k != "model"})
        return self._http.post("/chat/completions", body, headers=request.get("extra_headers"))

    async def close(self) -> None:
        if self._http is not None:
            await self._http.aclose()
        if self._openai is not None:
            await self._openai.close()


class ClientPool:
    """One client per endpoint (URL, key, headers) for the episodes of a run. A new
    ``AsyncOpenAI`` loads the CA bundle (tens of ms of CPU, more than the rest of a rollout) and
    opens its connections anew; a run's episodes all talk to the same endpoint."""

    def __init__(self) -> None:
        self._clients: dict[tuple[Any, ...], LeanChatClient] = {}

    def get(
        self, config: BaseClientConfig, base_url: str | None = None, api_key: str | None = None
    ) -> Any:
        args = _client_args(config, base_url, api_key)
        key = (args["base_url"], args["api_key"], tuple(sorted((config.headers or {}).items())))
        client = self._clients.get(key)
        if client is None:
            client = self._clients[key] = LeanChatClient(args)
        return client

    async def aclose(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.close()


_pool: ContextVar[ClientPool | None] = ContextVar("verifiers_v1_client_pool", default=None)


class using_pool:
    """Within this block (and the tasks started in it) ``model_client`` takes its clients
    from ``pool``, which its owner closes (an environment at the end of its run). A class,
    not a generator: a v1 rollout enters one, and held across its model calls the generator
    and its context manager were two more objects per rollout for the collector to walk."""

    def __init__(self, pool: ClientPool) -> None:
        self.pool = pool

    def __enter__(self) -> ClientPool:
        self._token = _pool.set(self.pool)
        return self.pool

    def __exit__(self, *exc: object) -> None:
        _pool.reset(self._token)


def enter_pool(pool: ClientPool) -> Token[ClientPool | None]:
    """``using_pool``'s entry without its object (``leave_pool`` with the token undoes it):
    for a caller that holds the pool across a whole rollout's model calls, where each object
    held is one more for the collector to walk."""
    return _pool.set(pool)


def leave_pool(token: Token[ClientPool | None]) -> None:
    _pool.reset(token)


@asynccontextmanager
async def pooled_clients() -> AsyncIterator[ClientPool]:
    """Within this block (and the tasks started in it) ``model_client`` shares one client per
    endpoint; they are closed when it ends."""
    pool = ClientPool()
    try:
        with using_pool(pool):
            yield pool
    finally:
        await pool.aclose()


def pooled_client(
    config: BaseClientConfig, base_url: str | None = None, api_key: str | None = None
) -> Any:
    """The pooled client for ``config``'s endpoint inside ``pooled_clients()`` (or
    ``using_pool``), else None: what a caller that makes a model call per turn uses without
    entering ``model_client`` each time (an async context manager per call was a visible
    share of a v1 rollout's CPU)."""
    pool = _pool.get()
    return pool.get(config, base_url, api_key) if pool is not None else None


@asynccontextmanager
async def model_client(
    config: BaseClientConfig, base_url: str | None = None, api_key: str | None = None
) -> AsyncIterator[AsyncOpenAI]:
    """The pooled client for ``config``'s endpoint inside ``pooled_clients()``; elsewhere a
    client of its own, closed on exit."""
    pooled = pooled_client(config, base_url, api_key)
    if pooled is not None:
        yield pooled
        return
    async with open_client(config, base_url, api_key) as client:
        yield client


def message_to_wire(message: Message) -> dict[str, Any]:
    """One v1 message as a chat-completions request message."""
    if isinstance(message, AssistantMessage):
        wire: dict[str, Any] = {"role": "assistant", "content": message.content}
        if message.tool_calls:
            wire["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in message.tool_calls
            ]
        return wire
    if isinstance(message, UserMessage | SystemMessage) and type(message.content) is str:
        if type(message) in (UserMessage, SystemMessage):  # a subclass may add fields
            # the dump below, built directly (a rollout converts each message on every call
            # that sends it, and the pydantic dump was most of that CPU); parts take the dump
            return {"role": message.role, "content": message.content}
    elif isinstance(message, ToolMessage) and type(message.content) is str:
        if type(message) is ToolMessage:
            wire = {
                "role": "tool",
                "tool_call_id": message.tool_call_id,
                "content": message.content,
            }
            if message.name is not None:
                wire["name"] = message.name
            return wire
    return message.model_dump(mode="json", exclude_none=True)


def message_from_completion(message: Any) -> AssistantMessage:
    """The assistant message of a chat completion's first choice (the ``ChatCompletion``'s
    object or the server's JSON dict)."""
    calls = [
        ToolCall(
            id=field(call, "id") or f"call_{i}",
            name=field(function, "name") or "",
            arguments=field(function, "arguments") or "",
        )
        for i, call in enumerate(field(message, "tool_calls") or [])
        if (function := field(call, "function")) is not None
    ]
    reasoning = field(message, "reasoning_content") or field(message, "reasoning")
    return AssistantMessage(
        content=field(message, "content"),
        reasoning_content=reasoning if isinstance(reasoning, str) else None,
        tool_calls=calls or None,
    )
