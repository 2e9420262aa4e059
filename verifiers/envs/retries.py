"""Retrying whole rollouts that failed for reasons a new attempt can fix.

A model call already retries transient HTTP failures itself (``verifiers.clients.retry``). This
is the level above: a rollout (or group) whose state ends with an infrastructure error (a crashed
sandbox, a dropped tunnel) or an unusable model reply is run again, up to ``max_retries`` times,
with exponential backoff and jitter. Errors in the environment's own logic (a ``ToolError``, a
broken reward) are kept as they are; they would fail the same way again.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from verifiers import errors
from verifiers.classic.error_data import ErrorChain, error_from_data, is_error_data

T = TypeVar("T")
logger = logging.getLogger("verifiers.envs.retries")
RETRYABLE: tuple[type[Exception], ...] = (errors.InfraError, errors.InvalidModelResponseError)


def _retryable(error: Any, error_types: tuple[type[Exception], ...]) -> BaseException | None:
    if isinstance(error, dict) and is_error_data(error):
        error = error_from_data(error)
    return error if isinstance(error, error_types) else None


def _failure(result: Any, error_types: tuple[type[Exception], ...]) -> BaseException | None:
    """The retryable error a result (a state, or a list of states) carries, if any."""
    states = result if isinstance(result, list) else [result]
    for state in states:
        if isinstance(state, dict):
            found = _retryable(state.get("error"), error_types)
            if found is not None:
                return found
    return None


def maybe_retry(
    func: Callable[..., Awaitable[T]],
    max_retries: int = 0,
    initial: float = 1.0,
    max_wait: float = 60.0,
    error_types: tuple[type[Exception], ...] = RETRYABLE,
) -> Callable[..., Awaitable[T]]:
    """``func`` retried while it raises, or returns a state carrying, one of ``error_types``.

    When retries run out the last result is returned (its error still recorded on it), so the
    run continues; an exception raised on the last attempt propagates.
    """
    if max_retries <= 0:
        return func

    async def wrapper(*args: Any, **kwargs: Any) -> T:
        for attempt in range(max_retries + 1):
            last = attempt == max_retries
            try:
                result = await func(*args, **kwargs)
            except error_types as exc:
                if last:
                    raise
                failure: BaseException = exc
            else:
                found = _failure(result, error_types)
                if found is None or last:
                    if found is not None:
                        logger.error(
                            "retries exhausted after %d attempts; last error: %r",
                            max_retries + 1,
                            ErrorChain(found),
                        )
                    return result
                failure = found
            delay = min(max_wait, initial * 2**attempt) + random.uniform(0, initial)
            logger.warning(
                "caught %r; retrying in %.1fs (retry %d/%d)",
                ErrorChain(failure),
                delay,
                attempt + 1,
                max_retries,
            )
            await asyncio.sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    wrapper.__name__ = getattr(func, "__name__", "retried")
    return wrapper
