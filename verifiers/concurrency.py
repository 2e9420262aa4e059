"""The one way the SDK calls user code that may be sync or async, and its no-op semaphore."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any


async def maybe_await(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call ``func`` and await the result when it is awaitable."""
    result = func(*args, **kwargs)
    if inspect.isawaitable(result):
        return await result
    return result


class NullAsyncContext:
    """``async with`` that does nothing: an unlimited semaphore."""

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, *exc: object) -> bool:
        return False


def semaphore(limit: int | None) -> asyncio.Semaphore | NullAsyncContext:
    """A semaphore of ``limit`` slots, or no limit when ``limit`` is None or <= 0."""
    return asyncio.Semaphore(limit) if limit is not None and limit > 0 else NullAsyncContext()


async def maybe_semaphore(limit: int | None = None) -> asyncio.Semaphore | NullAsyncContext:
    """``semaphore`` for callers that await it (the classic signature)."""
    return semaphore(limit)
