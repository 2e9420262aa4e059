"""The one way the SDK calls user code that may be sync or async, and its no-op semaphore."""

from __future__ import annotations

import asyncio
import inspect
import weakref
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


async def maybe_await(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call ``func`` and await the result when it is awaitable."""
    result = func(*args, **kwargs)
    if inspect.isawaitable(result):
        return await result
    return result


_PARAMETERS: weakref.WeakKeyDictionary[Any, tuple[bool, frozenset[str]]] = (
    weakref.WeakKeyDictionary()
)
"""What ``call_with_named`` reads of a hook's signature (does it take ``**kwargs``, which names),
per function: ``inspect.signature`` cost a cleanup hook ~20 us a rollout, every rollout. A bound
method is keyed by its function (the same one binds its first parameter for every instance)."""


def _parameters(func: Callable[..., Any]) -> tuple[bool, frozenset[str]] | None:
    """``(takes **kwargs, parameter names)`` of ``func``; None when it has no signature."""
    key = getattr(func, "__func__", None) if inspect.ismethod(func) else func
    try:
        return _PARAMETERS[key]
    except (KeyError, TypeError):  # not seen yet, or not weakly referable (not cached)
        pass
    try:
        params = inspect.signature(func).parameters
    except (TypeError, ValueError):
        return None
    found = (
        any(p.kind is p.VAR_KEYWORD for p in params.values()),
        frozenset(params),
    )
    try:
        _PARAMETERS[key] = found
    except TypeError:
        pass
    return found


async def call_with_named(func: Callable[..., Any], first: Any, **objects: Any) -> Any:
    """Call a hook with the objects its parameters name (``state``, ``env``, ``task``...), or,
    when it names none of them, with ``first`` as its one positional argument."""
    found = _parameters(func)
    if found is None:
        return await maybe_await(func, first)
    var_keyword, params = found
    if var_keyword:
        return await maybe_await(func, **objects)
    named = {k: v for k, v in objects.items() if k in params}
    if not named:
        return await maybe_await(func, first)
    return await maybe_await(func, **named)


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
