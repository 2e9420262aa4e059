"""``vf.Client``: one model API behind one method, ``get_response``.

The interface of verifiers 0.1.11+: a client turns typed messages and tools into its API's native
request (``to_native_prompt``, ``to_native_tool``), sends it (``get_native_response``), checks the
reply (``raise_from_native_response``) and turns it into a ``vf.Response``
(``from_native_response``). Subclasses implement those steps; environments and the rollout engine
only call ``get_response``. A client is built around a native client object (an
``openai.AsyncOpenAI``, this SDK's lean HTTP transport, ...) or from a serializable
``ClientConfig`` (``setup_client`` builds the native client then).
"""

from __future__ import annotations

import contextlib
import logging
from abc import ABC, abstractmethod
from typing import Any, Generic, TypeVar

from verifiers.clients.config import ClientConfig
from verifiers.errors import EmptyModelResponseError, ModelError, VFError
from verifiers.messages.models import Messages, Response, Tool
from verifiers.types import SamplingArgs

NativeClientT = TypeVar("NativeClientT")
NativePromptT = TypeVar("NativePromptT")
NativeResponseT = TypeVar("NativeResponseT")
NativeToolT = TypeVar("NativeToolT")


def _auth_errors() -> tuple[type[BaseException], ...]:
    """The provider SDKs' authentication errors: raised as they are, never retried or wrapped."""
    found: list[type[BaseException]] = []
    try:
        import openai

        found += [openai.AuthenticationError, openai.PermissionDeniedError]
    except ImportError:  # pragma: no cover - openai is a core dependency
        pass
    try:
        import anthropic  # optional

        found += [anthropic.AuthenticationError, anthropic.PermissionDeniedError]
    except ImportError:
        pass
    return tuple(found)


class Client(ABC, Generic[NativeClientT, NativePromptT, NativeResponseT, NativeToolT]):
    """Base class of every model client (see the module docstring for the steps)."""

    def __init__(self, client_or_config: NativeClientT | ClientConfig) -> None:
        self.logger = logging.getLogger(f"verifiers.clients.{type(self).__name__}")
        if isinstance(client_or_config, ClientConfig):
            self._config: ClientConfig | None = client_or_config
            self._client = self.setup_client(client_or_config)
        else:
            self._config = None
            self._client = client_or_config

    @property
    def client(self) -> NativeClientT:
        return self._client

    @property
    def config(self) -> ClientConfig | None:
        return self._config

    @property
    def base_url(self) -> str:
        """The endpoint this client talks to (recorded in results metadata)."""
        if self._config is not None:
            return self._config.api_base_url
        return str(getattr(self._client, "base_url", "") or "")

    @abstractmethod
    def setup_client(self, config: ClientConfig) -> NativeClientT: ...

    @abstractmethod
    async def to_native_tool(self, tool: Tool) -> NativeToolT: ...

    @abstractmethod
    async def to_native_prompt(self, messages: Messages) -> tuple[NativePromptT, dict[str, Any]]:
        """The native prompt, and keyword arguments for ``get_native_response``."""

    @abstractmethod
    async def get_native_response(
        self,
        prompt: NativePromptT,
        model: str,
        sampling_args: SamplingArgs,
        tools: list[NativeToolT] | None = None,
        **kwargs: Any,
    ) -> NativeResponseT: ...

    @abstractmethod
    async def raise_from_native_response(self, response: NativeResponseT) -> None:
        """Raise a ``vf.ModelError`` subclass when the reply cannot be used."""

    @abstractmethod
    async def from_native_response(self, response: NativeResponseT) -> Response: ...

    @abstractmethod
    async def close(self) -> None: ...

    async def to_native_tools(self, tools: list[Tool] | None) -> list[NativeToolT] | None:
        if tools is None:
            return None
        return [await self.to_native_tool(tool) for tool in tools]

    def _state_headers(self, state: Any) -> dict[str, str]:
        if self._config is None or not self._config.extra_headers_from_state or not state:
            return {}
        headers = {}
        for header, key in self._config.extra_headers_from_state.items():
            value = state.get(key)
            if value is not None:
                headers[header] = str(value)
        return headers

    async def get_response(
        self,
        prompt: Messages,
        model: str,
        sampling_args: SamplingArgs,
        tools: list[Tool] | None = None,
        **kwargs: Any,
    ) -> Response:
        """One model call. SDK errors come out as ``vf.ModelError`` (the cause kept), except
        authentication errors, which no retry can fix."""
        try:
            headers = self._state_headers(kwargs.get("state"))
            if headers:
                kwargs["extra_headers"] = {**(kwargs.get("extra_headers") or {}), **headers}
            native_prompt, extra = await self.to_native_prompt(prompt)
            native_tools = await self.to_native_tools(tools)
            native = await self.get_native_response(
                native_prompt, model, sampling_args, native_tools, **extra, **kwargs
            )
            try:
                await self.raise_from_native_response(native)
            except EmptyModelResponseError as exc:  # the reply still is what the model did
                if native is not None:
                    with contextlib.suppress(Exception):
                        exc.response = await self.from_native_response(native)
                raise
            return await self.from_native_response(native)
        except VFError:
            raise
        except _auth_errors():
            raise
        except Exception as exc:
            raise ModelError(f"{type(exc).__name__}: {exc}") from exc

    async def aclose(self) -> None:
        """This SDK's spelling of ``close`` (the rollout engine closes clients it made)."""
        await self.close()
