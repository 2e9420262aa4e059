"""A user's own client object, called through its own ``chat.completions.create``.

Anything that is not a plain ``openai.AsyncOpenAI`` (a subclass, ``AsyncAzureOpenAI``, a client
with a custom ``http_client`` or middleware, a test double) is called exactly as the classic SDK
calls it, and its reply object is kept as it is. Its errors are mapped onto this SDK's typed
errors so the rollout records them; retries are left to the client object itself.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

from verifiers import errors
from verifiers.clients.http_client import CONTEXT_LENGTH_MARKERS

_SDK_ERRORS: dict[str, type[errors.ModelError]] = {
    "APITimeoutError": errors.ModelTimeoutError,
    "APIConnectionError": errors.ModelConnectionError,
    "RateLimitError": errors.RateLimitError,
    "InternalServerError": errors.ServerError,
    "AuthenticationError": errors.AuthenticationError,
    "PermissionDeniedError": errors.AuthenticationError,
}


def _typed_error(exc: Exception) -> errors.ModelError:
    """The openai SDK's exception as this SDK's typed error (unknown exceptions: ModelError)."""
    try:
        import openai
    except ImportError:  # pragma: no cover - openai is a core dependency
        openai = None  # type: ignore[assignment]  # the module or None: checked below
    status = getattr(exc, "status_code", None)
    message = f"{type(exc).__name__}: {exc}"
    if openai is not None and isinstance(exc, openai.APIError):
        body = ""
        response = getattr(exc, "response", None)
        if response is not None:
            try:
                body = response.text
            except (UnicodeDecodeError, RuntimeError):  # undecodable, or a stream never read
                body = ""
        text = (str(exc) + " " + body).lower()
        if isinstance(exc, openai.BadRequestError) and any(
            m in text for m in CONTEXT_LENGTH_MARKERS
        ):
            return errors.PromptTooLongError(message, status_code=status)
        for cls in type(exc).__mro__:
            mapped = _SDK_ERRORS.get(cls.__name__)
            if mapped is not None and cls.__module__.startswith("openai"):
                return mapped(message, status_code=status)
        if isinstance(status, int) and status >= 500:
            return errors.ServerError(message, status_code=status)
        if isinstance(status, int):
            return errors.BadRequestError(message, status_code=status)
    return errors.ModelError(message, status_code=status if isinstance(status, int) else None)


class SDKClient:
    """Adapts an object with ``chat.completions.create`` / ``completions.create`` to ModelClient."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.base_url = str(getattr(client, "base_url", "") or "")

    async def _call(self, create: Any, **kwargs: Any) -> Any:
        try:
            if inspect.iscoroutinefunction(create) or not _is_sync_openai(self.client):
                result = create(**kwargs)
                if inspect.isawaitable(result):
                    result = await result
                return result
            return await asyncio.to_thread(create, **kwargs)  # a sync client: off the event loop
        except errors.VFError:
            raise
        except Exception as exc:
            raise _typed_error(exc) from exc

    async def chat(
        self,
        *,
        model: str,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        sampling_args: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Any:
        kwargs: dict[str, Any] = {"model": model, "messages": messages}
        if tools:
            kwargs["tools"] = tools
        kwargs.update(sampling_args or {})
        if headers:
            kwargs["extra_headers"] = {**(kwargs.get("extra_headers") or {}), **headers}
        return await self._call(self.client.chat.completions.create, **kwargs)

    async def complete(
        self,
        *,
        model: str,
        prompt: str,
        sampling_args: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Any:
        kwargs = {"model": model, "prompt": prompt, **(sampling_args or {})}
        if headers:
            kwargs["extra_headers"] = {**(kwargs.get("extra_headers") or {}), **headers}
        return await self._call(self.client.completions.create, **kwargs)

    async def aclose(self) -> None:
        return None  # the user's client is the user's to close


def _is_sync_openai(client: Any) -> bool:
    try:
        import openai
    except ImportError:  # pragma: no cover
        return False
    return isinstance(client, openai.OpenAI)
