"""Classic module path ``verifiers.utils.async_utils``."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from verifiers.concurrency import NullAsyncContext, maybe_await, maybe_semaphore
from verifiers.envs.retries import maybe_retry

T = TypeVar("T")


async def maybe_call_with_named_args(func: Callable[..., Any], **objects: Any) -> Any:
    """Call ``func`` with the objects its signature names (all of them for ``**kwargs``)."""
    params = inspect.signature(func).parameters
    if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        objects = {k: v for k, v in objects.items() if k in params}
    return await maybe_await(func, **objects)


async def with_sem(sem: Any, coro: Coroutine[Any, Any, T]) -> T:
    """Await ``coro`` holding ``sem``; a coroutine never started is closed, not leaked."""
    try:
        async with sem:
            return await coro
    finally:
        coro.close()


__all__ = [
    "NullAsyncContext",
    "maybe_await",
    "maybe_call_with_named_args",
    "maybe_retry",
    "maybe_semaphore",
    "with_sem",
]
